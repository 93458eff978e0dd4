#!/usr/bin/env python3
"""Benchmark `pincer acp`: startup, memory and streaming throughput.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`.

Measures
  1. spawn -> `initialize` response line read, N times (median, p90, min);
  2. resident memory (VmRSS, VmHWM from /proc/PID/status) once `initialize`
     and `session/new` have been answered;
  3. streaming throughput: a scripted model emitting --chunks text chunks with
     no delay; agent_message_chunk notifications per second reaching this
     client, from the `session/prompt` request to its response; and whether
     the tape (the `tape` table in $PINCER_DATA_DIR/pincer.db) already holds
     every text_delta row when the response arrives;
  4. with --codex PATH, the same first two figures for `codex app-server`
     (its `initialize`, then `thread/start` as the equivalent of session/new),
     with an isolated CODEX_HOME, and the ratios pincer vs codex.

Prints a Markdown report; --write FILE puts the results section into FILE
between the markers below (appending the section if they are missing).

    python3 scripts/bench.py --bin target/release/pincer
    python3 scripts/bench.py --codex /tmp/codex-bench --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import select
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START_MARK = "<!-- bench:results:start -->"
END_MARK = "<!-- bench:results:end -->"

# Targets the results are checked against.
TARGET_INIT_MS = 5.0
TARGET_INIT_RATIO = 10.0
TARGET_RSS_MIB = 10.0
TARGET_RSS_RATIO = 8.0
TARGET_CHUNKS_PER_S = 100_000.0

INIT_TIMEOUT_S = 30.0
STREAM_TIMEOUT_S = 600.0

ACP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}
CODEX_INITIALIZE = {
    "id": 1,
    "method": "initialize",
    "params": {"clientInfo": {"name": "bench", "version": "0"}},
}


class BenchError(Exception):
    pass


class RpcError(BenchError):
    """A JSON-RPC error response."""

    def __init__(self, request_id, error: dict):
        super().__init__(f"request {request_id} failed: {error}")
        self.code = error.get("code") if isinstance(error, dict) else None


# --------------------------------------------------------------------------- #
# A child process spoken to with newline-delimited JSON over its pipes.
# --------------------------------------------------------------------------- #


class Peer:
    """A child process, spawned in its own process group, read line by line."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr_path: Path):
        self._stderr = open(stderr_path, "ab")
        self.stderr_path = stderr_path
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=cwd,
            bufsize=0,
            start_new_session=True,
        )
        self.pid = self.proc.pid
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._buf = bytearray()

    def send(self, message: dict) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._in, view)
            view = view[written:]

    def _fill(self, deadline: float) -> bool:
        """Reads what is available (waiting until the deadline); False on EOF."""
        left = deadline - time.perf_counter()
        if left <= 0:
            raise BenchError(f"timed out waiting for output from pid {self.pid} ({self.stderr_tail()})")
        ready, _, _ = select.select([self._out], [], [], left)
        if not ready:
            raise BenchError(f"timed out waiting for output from pid {self.pid} ({self.stderr_tail()})")
        data = os.read(self._out, 1 << 20)
        if not data:
            return False
        self._buf += data
        return True

    def read_line(self, timeout: float = INIT_TIMEOUT_S) -> bytes:
        deadline = time.perf_counter() + timeout
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[: nl + 1])
                del self._buf[: nl + 1]
                return line
            if not self._fill(deadline):
                raise BenchError(f"pid {self.pid} closed stdout ({self.stderr_tail()})")

    def wait_response(self, request_id: int, timeout: float = INIT_TIMEOUT_S) -> dict:
        """Reads lines until the response to request_id; other lines are dropped."""
        deadline = time.perf_counter() + timeout
        while True:
            line = self.read_line(max(deadline - time.perf_counter(), 0.001))
            message = json.loads(line)
            if message.get("id") == request_id and ("result" in message or "error" in message):
                if "error" in message:
                    raise RpcError(request_id, message["error"])
                return message["result"]

    def stream_until(self, request_id: int, marker: bytes, timeout: float) -> tuple[int, dict]:
        """Counts lines containing `marker` until the response to request_id.

        Works on whole blocks of lines so the client is not the bottleneck: only
        lines without the marker are parsed as JSON."""
        deadline = time.perf_counter() + timeout
        count = 0
        while True:
            cut = self._buf.rfind(b"\n")
            if cut >= 0:
                block = bytes(self._buf[: cut + 1])
                del self._buf[: cut + 1]
                hits = block.count(marker)
                lines = block.count(b"\n")
                if hits == lines:
                    count += hits
                else:
                    for index, line in enumerate(block.split(b"\n")[:-1]):
                        if marker in line:
                            count += 1
                            continue
                        message = json.loads(line)
                        if message.get("id") == request_id and (
                            "result" in message or "error" in message
                        ):
                            if "error" in message:
                                raise RpcError(request_id, message["error"])
                            # Keep whatever followed the response.
                            rest = b"\n".join(block.split(b"\n")[index + 1 :])
                            self._buf[:0] = rest
                            return count, message["result"]
            if not self._fill(deadline):
                raise BenchError(f"pid {self.pid} closed stdout mid-stream ({self.stderr_tail()})")

    def status(self) -> dict[str, int]:
        """Memory fields of /proc/PID/status, in KiB."""
        fields = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"):
                    fields[key] = int(value.split()[0])
        return fields

    def tree_rss(self) -> tuple[int, int]:
        """VmRSS summed over the process and its descendants (KiB), and how many there are."""
        total, count, todo = 0, 0, [self.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
                count += 1
                for children in glob.glob(f"/proc/{pid}/task/*/children"):
                    with open(children) as f:
                        todo.extend(int(x) for x in f.read().split())
            except (OSError, ValueError):
                continue
        return total, count

    def stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace").strip().splitlines()
            return "stderr: " + " | ".join(text[-3:]) if text else "stderr empty"
        except OSError:
            return "stderr unreadable"

    def close(self, grace: float = 5.0) -> None:
        """Closes stdin (a clean exit for pincer), then ends the process group."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        # The child was started in its own session: its pid is the group id.
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.proc.wait(timeout=2.0)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc.stdout.close()
        self._stderr.close()


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil
    return ordered[int(rank) - 1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": statistics.median(values),
        "p90": percentile(values, 90),
        "min": min(values),
        "max": max(values),
    }


def mib(kib: float) -> float:
    return kib / 1024.0


def cpu_busy(interval: float = 1.0) -> float:
    """Percent of all CPUs busy over `interval` seconds (from /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle
    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    total = total1 - total0
    return 100.0 * (1.0 - (idle1 - idle0) / total) if total > 0 else 0.0


def wait_idle(limit_s: float, say) -> float:
    """Waits (up to limit_s) until other work leaves the CPUs at most 10% busy."""
    deadline = time.monotonic() + limit_s
    busy = cpu_busy(1.0)
    while busy > 10.0 and time.monotonic() < deadline:
        say(f"waiting for an idle machine: CPUs {busy:.0f}% busy")
        busy = cpu_busy(2.0)
    return busy


def git_revision(binary: str) -> str:
    """The commit of the work tree the binary sits in, marked dirty if edited."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             timeout=10, cwd=Path(binary).parent)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def stale_sources(binary: str) -> list[str]:
    """Source files of the work tree newer than the binary (a rebuild is due)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             timeout=10, cwd=Path(binary).parent).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return []
    if not top:
        return []
    built = os.stat(binary).st_mtime
    root = Path(top)
    files = [root / "Cargo.toml", root / "Cargo.lock", *root.glob("src/**/*.rs")]
    return sorted(str(f.relative_to(root)) for f in files if f.exists() and f.stat().st_mtime > built)


def machine_info() -> dict[str, str]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                    break
    except OSError:
        pass
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return {
        "loadavg": load,
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "kernel": platform.release(),
        "memory": mem,
        "python": platform.python_version(),
    }


def pincer_env(root: Path, data_dir: Path) -> dict[str, str]:
    """An environment that reads no user config and keeps data in data_dir."""
    for sub in ("home", "config", "xdg-data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
        "PINCER_DATA_DIR": str(data_dir),
        "LANG": "C.UTF-8",
    }


def codex_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LANG": "C.UTF-8",
    }


def resolve_codex(path: str) -> tuple[list[str], str]:
    """The argv prefix for codex, and a description of what it is.

    PATH may be the native binary, the npm wrapper (bin/codex.js, .bin/codex),
    or an npm prefix / node_modules directory holding @openai/codex; for the
    latter two the native binary shipped in the platform package is preferred.
    """
    p = Path(path).resolve()
    if p.is_dir():
        candidates = sorted(
            glob.glob(str(p / "**/@openai/codex-*/vendor/*/bin/codex"), recursive=True)
            + glob.glob(str(p / "**/@openai/codex/vendor/*/codex/codex"), recursive=True)
            + glob.glob(str(p / "**/@openai/codex/vendor/*/bin/codex"), recursive=True)
        )
        arch = platform.machine()
        preferred = [c for c in candidates if arch in c] or candidates
        if not preferred:
            raise BenchError(f"no native codex binary found under {p}")
        return [preferred[0]], f"native binary {preferred[0]}"
    if not p.exists():
        raise BenchError(f"--codex {path}: no such file")
    with open(p, "rb") as f:
        head = f.read(64)
    if head.startswith(b"\x7fELF"):
        return [str(p)], f"native binary {p}"
    # A script (the npm wrapper): look for the native binary next to it first.
    package_root = p.parent.parent  # node_modules/@openai/codex/bin/codex.js
    node_modules = package_root.parent.parent
    if node_modules.name == "node_modules":
        try:
            native, what = resolve_codex(str(node_modules))
            return native, what + f" (found beside the wrapper {p})"
        except BenchError:
            pass
    return [str(p)], f"node wrapper {p}"


def codex_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv + ["--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({err})"


def pincer_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({err})"


# --------------------------------------------------------------------------- #
# Measurements
# --------------------------------------------------------------------------- #


def snapshot(peer: Peer) -> dict[str, int]:
    """Memory of the process (/proc/PID/status) plus its whole process tree."""
    status = peer.status()
    status["TreeRSS"], status["Procs"] = peer.tree_rss()
    return status


def time_initialize(argv, env_for, cwd: Path, log: Path, request: dict, n: int, fresh_dir=None) -> list[float]:
    """Milliseconds from spawn to the initialize response line, n times.

    env_for(i) gives the environment of run i (so runs may share or not share
    a data directory)."""
    times = []
    for i in range(n):
        env = env_for(i)
        peer = Peer(argv, env, cwd, log)
        try:
            peer.send(request)
            peer.wait_response(request["id"])
            times.append((time.perf_counter() - peer.t_spawn) * 1000.0)
        finally:
            peer.close()
    return times


def pincer_memory(binary: str, root: Path, reps: int, cwd: Path, log: Path) -> list[dict[str, int]]:
    """/proc status after initialize + session/new were answered, reps times."""
    samples = []
    data_dir = root / "data-warm"
    env = pincer_env(root, data_dir)
    for _ in range(reps):
        peer = Peer([binary, "acp"], env, cwd, log)
        try:
            peer.send(ACP_INITIALIZE)
            peer.wait_response(1)
            peer.send({
                "jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": str(cwd), "mcpServers": []},
            })
            peer.wait_response(2)
            samples.append(snapshot(peer))
        finally:
            peer.close()
    return samples


def codex_memory(argv: list[str], home: Path, reps: int, cwd: Path, log: Path) -> dict:
    """/proc status after initialize, and after thread/start if it works."""
    after_init, after_thread, thread_error = [], [], None
    env = codex_env(home)
    for _ in range(reps):
        peer = Peer(argv + ["app-server"], env, cwd, log)
        try:
            peer.send(CODEX_INITIALIZE)
            peer.wait_response(1)
            after_init.append(snapshot(peer))
            peer.send({"method": "initialized"})
            if thread_error is None:
                peer.send({"id": 2, "method": "thread/start", "params": {"cwd": str(cwd)}})
                try:
                    peer.wait_response(2)
                    after_thread.append(snapshot(peer))
                except BenchError as err:
                    thread_error = str(err)
        finally:
            peer.close()
    return {"after_init": after_init, "after_thread": after_thread, "thread_error": thread_error}


def prompt_race(binary: str, root: Path, trials: int, cwd: Path, log: Path) -> int:
    """How many of `trials` prompts, sent the moment session/new is answered, are
    refused with "session not found"."""
    script = root / "race.jsonl"
    script.write_text(json.dumps([{"text": "hi"}]) + "\n")
    env = pincer_env(root, root / "data-race")
    refused = 0
    for _ in range(trials):
        peer = Peer([binary, "acp", "--script", str(script)], env, cwd, log)
        try:
            peer.send(ACP_INITIALIZE)
            peer.wait_response(1)
            peer.send({
                "jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": str(cwd), "mcpServers": []},
            })
            session_id = peer.wait_response(2)["sessionId"]
            peer.send({
                "jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
            })
            try:
                peer.wait_response(3)
            except RpcError as err:
                if err.code != -32002:
                    raise
                refused += 1
        finally:
            peer.close()
    return refused


def tape_count(db: Path, session_id: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        return conn.execute(
            "SELECT COUNT(*) FROM tape WHERE kind = 'text_delta' AND session_id = ?",
            (session_id,),
        ).fetchone()[0]
    finally:
        conn.close()


def pincer_stream(binary: str, root: Path, chunks: int, rep: int, cwd: Path, log: Path) -> dict:
    """One streaming run in a fresh data directory."""
    data_dir = root / f"data-stream-{rep}"
    script = root / "stream.jsonl"
    script.write_text(json.dumps([{"repeat": {"count": chunks, "text": "x"}}]) + "\n")
    env = pincer_env(root, data_dir)
    peer = Peer([binary, "acp", "--script", str(script)], env, cwd, log)
    try:
        peer.send(ACP_INITIALIZE)
        peer.wait_response(1)
        peer.send({
            "jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": str(cwd), "mcpServers": []},
        })
        session_id = peer.wait_response(2)["sessionId"]
        # The prompt goes out as soon as session/new is answered, as an editor's
        # would. A refusal with "session not found" (-32002) is a known race in
        # pincer; it is counted and the prompt sent again.
        refused = 0
        for attempt in range(50):
            request_id = 3 + attempt
            t0 = time.perf_counter()
            peer.send({
                "jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
            })
            try:
                count, result = peer.stream_until(request_id, b'"agent_message_chunk"', STREAM_TIMEOUT_S)
                break
            except RpcError as err:
                if err.code != -32002:
                    raise
                refused += 1
                time.sleep(0.001)
        else:
            raise BenchError("session/prompt refused 50 times in a row")
        t_response = time.perf_counter()
        elapsed = t_response - t0
        status = peer.status()
        db = data_dir / "pincer.db"
        at_response = tape_count(db, session_id)
        t_checked = time.perf_counter()
        rows = at_response
        lag = 0.0 if rows >= chunks else None
        while rows < chunks and time.perf_counter() - t_response < 60.0:
            time.sleep(0.001)
            rows = tape_count(db, session_id)
            if rows >= chunks:
                lag = time.perf_counter() - t_response
        return {
            "prompt_refused": refused,
            "chunks_received": count,
            "stop_reason": result.get("stopReason"),
            "elapsed_s": elapsed,
            "chunks_per_s": count / elapsed if elapsed > 0 else float("inf"),
            "tape_rows_at_response": at_response,
            "tape_query_ms": (t_checked - t_response) * 1000.0,
            "tape_rows_final": rows,
            "tape_lag_ms": None if lag is None else lag * 1000.0,
            "hwm_kib": status["VmHWM"],
            "rss_kib": status["VmRSS"],
        }
    finally:
        peer.close(grace=30.0)


# --------------------------------------------------------------------------- #
# Report
# --------------------------------------------------------------------------- #


def fmt_ms(v: float) -> str:
    return f"{v:.2f} ms" if v < 100 else f"{v:.0f} ms"


def verdict(ok: bool) -> str:
    return "met" if ok else "**MISSED**"


def run(args) -> dict:
    binary = str(Path(args.bin).resolve())
    if not os.access(binary, os.X_OK):
        raise BenchError(f"{args.bin}: not an executable; build it first with `cargo build --release`")
    codex = resolve_codex(args.codex) if args.codex else None
    root = Path(tempfile.mkdtemp(prefix="pincer-bench-", dir=args.tmp))
    cwd = root / "ws"
    cwd.mkdir()
    log = root / "stderr.log"
    results: dict = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "pincer_version": pincer_version(binary),
        "git": git_revision(binary),
        "built": _dt.datetime.fromtimestamp(os.stat(binary).st_mtime).astimezone().isoformat(timespec="seconds"),
        "stale": stale_sources(binary),
        "bin": args.bin,
        "n": args.n,
        "chunks": args.chunks,
        "stream_reps": args.stream_reps,
    }

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    if args.wait_idle > 0:
        results["busy_before"] = wait_idle(args.wait_idle, say)
    else:
        results["busy_before"] = cpu_busy(1.0)
    results["machine"] = machine_info()  # after the wait: its load average is the one measured under
    try:
        # 1. initialize latency. A warm-up run creates and migrates the database,
        # as an editor's Nth launch finds it; every measured run reuses it.
        say(f"pincer: initialize x{args.n} ...")
        warm_env = pincer_env(root, root / "data-warm")
        time_initialize([binary, "acp"], lambda i: warm_env, cwd, log, ACP_INITIALIZE, 2)
        results["pincer_init_ms"] = summary(
            time_initialize([binary, "acp"], lambda i: warm_env, cwd, log, ACP_INITIALIZE, args.n)
        )
        cold_n = max(3, min(10, args.n // 5))
        results["pincer_init_cold_ms"] = summary(
            time_initialize(
                [binary, "acp"],
                lambda i: pincer_env(root, root / f"data-cold-{i}"),
                cwd, log, ACP_INITIALIZE, cold_n,
            )
        )

        # 2. memory after initialize + session/new.
        say("pincer: memory ...")
        mem = pincer_memory(binary, root, args.mem_reps, cwd, log)
        results["pincer_mem"] = {
            key: statistics.median(s[key] for s in mem) for key in mem[0]
        }

        # 3. streaming throughput and the tape.
        runs = []
        for rep in range(args.stream_reps):
            say(f"pincer: streaming {args.chunks} chunks, run {rep + 1}/{args.stream_reps} ...")
            runs.append(pincer_stream(binary, root, args.chunks, rep, cwd, log))
        results["stream_runs"] = runs
        results["stream_chunks_per_s_median"] = statistics.median(r["chunks_per_s"] for r in runs)

        if args.race_n > 0:
            say(f"pincer: session/prompt right after session/new x{args.race_n} ...")
            results["race_n"] = args.race_n
            results["race_refused"] = prompt_race(binary, root, args.race_n, cwd, log)

        # 4. codex app-server.
        if codex:
            argv, what = codex
            results["codex_used"] = what
            results["codex_version"] = codex_version(argv)
            home = root / "codex-home"
            env = codex_env(home)
            say(f"codex: initialize x{args.codex_n} ({what}) ...")
            time_initialize(argv + ["app-server"], lambda i: env, cwd, log, CODEX_INITIALIZE, 2)
            results["codex_init_ms"] = summary(
                time_initialize(argv + ["app-server"], lambda i: env, cwd, log, CODEX_INITIALIZE, args.codex_n)
            )
            results["codex_init_cold_ms"] = summary(
                time_initialize(
                    argv + ["app-server"],
                    lambda i: codex_env(root / f"codex-home-cold-{i}"),
                    cwd, log, CODEX_INITIALIZE, cold_n,
                )
            )
            say("codex: memory ...")
            cm = codex_memory(argv, home, args.mem_reps, cwd, log)
            results["codex_mem_init"] = {
                key: statistics.median(s[key] for s in cm["after_init"]) for key in cm["after_init"][0]
            }
            if cm["after_thread"]:
                results["codex_mem_thread"] = {
                    key: statistics.median(s[key] for s in cm["after_thread"])
                    for key in cm["after_thread"][0]
                }
            results["codex_thread_error"] = cm["thread_error"]
        results["busy_after"] = cpu_busy(1.0)
    finally:
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return results


def report(r: dict) -> str:
    m = r["machine"]
    pi = r["pincer_init_ms"]
    pm = r["pincer_mem"]
    ci = r.get("codex_init_ms")
    cc = r.get("codex_init_cold_ms")
    cmem = r.get("codex_mem_thread") or r.get("codex_mem_init")
    codex_point = "`initialize` + `thread/start`" if "codex_mem_thread" in r else "`initialize` only"
    runs = r["stream_runs"]
    chunks = r["chunks"]
    out = []
    out.append(f"Measured {r['date']} with `scripts/bench.py` against {r['pincer_version']} "
               f"(`{r['bin']}`, built {r['built']}; work tree at `{r['git']}`).")
    if r["stale"]:
        out.append("")
        out.append(f"**Warning:** the binary is older than {len(r['stale'])} source file(s) "
                   f"({', '.join(r['stale'][:5])}{', …' if len(r['stale']) > 5 else ''}): rebuild it.")
    out.append("")
    out.append(
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}, "
        f"Python {m['python']}. Other work on the machine: load average {m['loadavg']} at the start; "
        f"CPUs {r['busy_before']:.0f}% busy in the second before, {r['busy_after']:.0f}% in the second after "
        "(figures are noisier when these are high)."
    )
    if "codex_version" in r:
        out.append("")
        out.append(f"Peer: `{r['codex_version']}` running `codex app-server`, {r['codex_used']}.")
    out.append("")

    def row(name, pv, cv=None, ratio=None):
        out.append(f"| {name} | {pv} | {cv if cv is not None else '—'} | {ratio if ratio is not None else '—'} |")

    def x(c, pv, digits=0):
        return f"{c / pv:.{digits}f}×"

    out.append("| measure | pincer | codex app-server | codex ÷ pincer |")
    out.append("| --- | ---: | ---: | ---: |")
    n_label = f"n={pi['n']}" + (f" / {ci['n']}" if ci else "")
    for key in ("median", "p90", "min"):
        row(
            f"spawn → `initialize` response, {key} ({n_label})",
            fmt_ms(pi[key]),
            fmt_ms(ci[key]) if ci else None,
            x(ci[key], pi[key]) if ci else None,
        )
    pc = r["pincer_init_cold_ms"]
    row(
        f"same, first start on an empty data dir / CODEX_HOME, median (n={pc['n']})",
        fmt_ms(pc["median"]),
        fmt_ms(cc["median"]) if cc else None,
        x(cc["median"], pc["median"]) if cc else None,
    )
    point = "after `initialize` + `session/new`" + (f" (codex: {codex_point})" if cmem else "")
    row(
        f"VmRSS {point}",
        f"{mib(pm['VmRSS']):.1f} MiB",
        f"{mib(cmem['VmRSS']):.1f} MiB" if cmem else None,
        x(cmem["VmRSS"], pm["VmRSS"], 1) if cmem else None,
    )
    row(
        "VmHWM (peak RSS) at the same point",
        f"{mib(pm['VmHWM']):.1f} MiB",
        f"{mib(cmem['VmHWM']):.1f} MiB" if cmem else None,
        x(cmem["VmHWM"], pm["VmHWM"], 1) if cmem else None,
    )
    row(
        "… of which anonymous / file-backed (RssAnon / RssFile)",
        f"{mib(pm['RssAnon']):.1f} / {mib(pm['RssFile']):.1f} MiB",
        f"{mib(cmem['RssAnon']):.1f} / {mib(cmem['RssFile']):.1f} MiB" if cmem else None,
        x(cmem["RssAnon"], pm["RssAnon"], 1) if cmem else None,
    )
    row(
        "VmRSS of the whole process tree (processes)",
        f"{mib(pm['TreeRSS']):.1f} MiB ({pm['Procs']:.0f})",
        f"{mib(cmem['TreeRSS']):.1f} MiB ({cmem['Procs']:.0f})" if cmem else None,
        x(cmem["TreeRSS"], pm["TreeRSS"], 1) if cmem else None,
    )
    row("threads", f"{pm['Threads']:.0f}", f"{cmem['Threads']:.0f}" if cmem else None)
    if "codex_mem_thread" in r:
        row("codex VmRSS after `initialize` only", "—", f"{mib(r['codex_mem_init']['VmRSS']):.1f} MiB")
    rates = ", ".join(f"{v['chunks_per_s']:,.0f}" for v in runs)
    row(
        f"streaming {chunks:,} chunks: chunks/s reaching the client, median of {len(runs)} ({rates})",
        f"{r['stream_chunks_per_s_median']:,.0f}/s",
    )
    row("streaming: `session/prompt` sent → its response read, median",
        fmt_ms(statistics.median(v["elapsed_s"] * 1000 for v in runs)))
    row("tape: text_delta rows when the response arrived, each run",
        ", ".join(f"{v['tape_rows_at_response']:,}" for v in runs))
    row("tape: complete how long after the response, each run",
        ", ".join("already" if v["tape_lag_ms"] == 0 else ("never (60 s)" if v["tape_lag_ms"] is None
                                                           else fmt_ms(v["tape_lag_ms"])) for v in runs))
    row("VmHWM (peak RSS) after streaming, median",
        f"{mib(statistics.median(v['hwm_kib'] for v in runs)):.1f} MiB")
    if "race_n" in r:
        row("`session/prompt` sent the moment `session/new` is answered: refused as \"session not found\"",
            f"{r['race_refused']} of {r['race_n']}")
    out.append("")

    out.append("| target | result | verdict |")
    out.append("| --- | --- | --- |")
    out.append(f"| `initialize` answered in under {TARGET_INIT_MS:.0f} ms (median) | {fmt_ms(pi['median'])} "
               f"| {verdict(pi['median'] < TARGET_INIT_MS)} |")
    if ci:
        ratio = ci["median"] / pi["median"]
        out.append(f"| … at least {TARGET_INIT_RATIO:.0f}× faster than codex | {ratio:.0f}× "
                   f"| {verdict(ratio >= TARGET_INIT_RATIO)} |")
    rss = mib(pm["VmRSS"])
    out.append(f"| under {TARGET_RSS_MIB:.0f} MiB resident (VmRSS after `session/new`) | {rss:.1f} MiB "
               f"| {verdict(rss < TARGET_RSS_MIB)} |")
    if cmem:
        ratio = cmem["VmRSS"] / pm["VmRSS"]
        out.append(f"| … at least {TARGET_RSS_RATIO:.0f}× smaller than codex (VmRSS, codex after {codex_point}) "
                   f"| {ratio:.1f}× | {verdict(ratio >= TARGET_RSS_RATIO)} |")
    rate = r["stream_chunks_per_s_median"]
    out.append(f"| over {TARGET_CHUNKS_PER_S:,.0f} chunks/s end to end | {rate:,.0f}/s "
               f"| {verdict(rate > TARGET_CHUNKS_PER_S)} |")
    complete = sum(v["tape_rows_at_response"] >= chunks for v in runs)
    out.append(f"| the tape never the bottleneck: all {chunks:,} rows on the tape when the response arrives "
               f"| {complete} of {len(runs)} runs | {verdict(complete == len(runs))} |")
    received = [v["chunks_received"] for v in runs]
    out.append(f"| every chunk reached the client | {', '.join(f'{c:,}' for c in received)} "
               f"| {verdict(all(c == chunks for c in received))} |")
    if r.get("codex_thread_error"):
        out.append("")
        out.append(f"codex `thread/start` failed, so its memory is after `initialize` only: {r['codex_thread_error']}")
    out.append("")
    return "\n".join(out)


def write_section(path: Path, body: str) -> None:
    section = f"{START_MARK}\n{body}\n{END_MARK}\n"
    if path.exists():
        text = path.read_text()
        start, end = text.find(START_MARK), text.find(END_MARK)
        if start >= 0 and end > start:
            text = text[:start] + section + text[end + len(END_MARK) :].lstrip("\n")
        else:
            text = text.rstrip("\n") + "\n\n## Results\n\n" + section
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "# Benchmarks\n\n## Results\n\n" + section
    path.write_text(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="target/release/pincer", help="pincer binary (default: %(default)s)")
    parser.add_argument("--codex", metavar="PATH",
                        help="codex to compare against: the native binary, the npm wrapper, or an npm prefix "
                             "holding @openai/codex (its native binary is used)")
    parser.add_argument("-n", type=int, default=50, help="initialize runs (default: %(default)s)")
    parser.add_argument("--codex-n", type=int, default=None, help="codex initialize runs (default: -n)")
    parser.add_argument("--mem-reps", type=int, default=5, help="memory samples, median taken (default: %(default)s)")
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks to stream (default: %(default)s)")
    parser.add_argument("--stream-reps", type=int, default=3, help="streaming runs, median taken (default: %(default)s)")
    parser.add_argument("--race-n", type=int, default=100,
                        help="prompts sent the moment session/new is answered, to count refusals (0: skip; "
                             "default: %(default)s)")
    parser.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                        help="first wait up to this long for the CPUs to be at most 10%% busy (default: no wait)")
    parser.add_argument("--tmp", default=None, help="where the scratch directory goes (default: $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    parser.add_argument("--write", metavar="FILE", help="put the results section into FILE (e.g. docs/benchmarks.md)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.codex_n is None:
        args.codex_n = args.n
    try:
        results = run(args)
        if results["stale"]:
            print(f"bench: warning: {args.bin} is older than {', '.join(results['stale'])}", file=sys.stderr)
    except BenchError as err:
        print(f"bench: {err}", file=sys.stderr)
        return 1
    text = report(results)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if args.write:
        write_section(Path(args.write), text)
        print(f"wrote the results section of {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
