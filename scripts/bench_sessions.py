#!/usr/bin/env python3
"""Benchmark `pincer acp` against a store of many sessions.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`.

Prepares a data directory of --sessions stored sessions (10,000 by default)
the way an editor makes them: one `pincer acp` process with a scripted model,
and for each session `session/new` (in one of --workspaces directories,
unevenly: the first holds 1 %, the second 30 %, the rest share the others),
one short `session/prompt` (a one-turn script; the prompt becomes the title)
and `session/close`, --window sessions in flight at once. The result is kept
under --cache (default: `bench-sessions/` in $CARGO_TARGET_DIR, else in
`target/`), keyed by `pincer --version`, the
store's schema version and the layout, and reused; each measurement works on a
copy of it, so the cache is never changed.

Measures
  1. start-up: N times, a fresh `pincer acp` process on the empty store (a
     migrated database with no session, copied afresh each time) and one on
     the 10,000-session store, in alternating order: spawn -> `initialize`
     response read, then `session/new` request -> response read; p50, p95,
     p99 and the ratio 10k / empty;
  2. `session/list`: one process on the 10,000-session store walks every page
     (50 a page, following `nextCursor`), --walks times: the time of each page
     from request written to response read (p50, p99, max per page, the page
     count, the first and last ten pages' mean); the same with a `cwd` filter
     on the 1 % workspace and on the 30 % one. Every walk is checked: each
     session once, newest first, as many as the store holds.

Prints a Markdown report.

    python3 scripts/bench_sessions.py --bin target/release/pincer
    python3 scripts/bench_sessions.py -n 300 --walks 10 --json /tmp/sessions.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import re
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

# Bumped whenever the way the store is seeded changes, so an old cache is not reused.
LAYOUT = 1
PAGE = 50

TARGET_RATIO = 1.10  # initialize and session/new with 10k sessions vs empty, p50
TARGET_PAGE_MS = 20.0  # each session/list page

TIMEOUT_S = 60.0

ACP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}

PROMPTS = [
    "Fix the flaky test in the parser module",
    "Why does the build fail on CI?",
    "Add a --verbose flag to the CLI",
    "Explain what src/main.rs does",
    "Rename the config key and update the docs",
    "Write a test for the cache eviction",
    "Review the last commit",
    "Speed up the import of large files",
]


class BenchError(Exception):
    pass


class RpcError(BenchError):
    def __init__(self, request_id, error):
        super().__init__(f"request {request_id} failed: {error}")
        self.code = error.get("code") if isinstance(error, dict) else None


# --------------------------------------------------------------------------- #
# A child process spoken to with newline-delimited JSON over its pipes.
# --------------------------------------------------------------------------- #


class Peer:
    """`pincer acp`, spawned in its own process group, read line by line."""

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
        self._next_id = 100

    def send(self, message: dict) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._in, view)
            view = view[written:]

    def request(self, method: str, params: dict) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def _fill(self, deadline: float) -> bool:
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

    def read_line(self, timeout: float = TIMEOUT_S) -> bytes:
        deadline = time.perf_counter() + timeout
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[: nl + 1])
                del self._buf[: nl + 1]
                return line
            if not self._fill(deadline):
                raise BenchError(f"pid {self.pid} closed stdout ({self.stderr_tail()})")

    def read_message(self, timeout: float = TIMEOUT_S) -> tuple[dict, float]:
        """The next message, and when its line was read."""
        line = self.read_line(timeout)
        return json.loads(line), time.perf_counter()

    def wait_response(self, request_id: int, timeout: float = TIMEOUT_S) -> tuple[dict, float]:
        """Reads until the response to request_id (other lines are dropped):
        its result, and when its line was read."""
        deadline = time.perf_counter() + timeout
        while True:
            message, at = self.read_message(max(deadline - time.perf_counter(), 0.001))
            if message.get("id") == request_id and ("result" in message or "error" in message):
                if "error" in message:
                    raise RpcError(request_id, message["error"])
                return message["result"], at

    def stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace").strip().splitlines()
            return "stderr: " + " | ".join(text[-3:]) if text else "stderr empty"
        except OSError:
            return "stderr unreadable"

    def close(self, grace: float = 10.0) -> None:
        """Closes stdin (a clean exit for pincer), then ends the process group."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
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
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
        "mean": statistics.fmean(values),
    }


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


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


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
    return {
        "loadavg": loadavg(),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "kernel": platform.release(),
        "memory": mem,
        "python": platform.python_version(),
    }


def git_revision(binary: str) -> str:
    """The commit of the work tree the binary sits in (else this script's),
    marked dirty if edited."""
    for place in (Path(binary).parent, Path(__file__).resolve().parent):
        try:
            out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                                 timeout=10, cwd=place)
            if out.returncode == 0:
                return out.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
    return "unknown"


def pincer_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({err})"


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


def schema_version(db: Path) -> int:
    """The store's schema version, read from a closed database, read-only."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def copy_data(src: Path, dst: Path) -> None:
    """A copy of a data directory the binary last closed cleanly."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


# --------------------------------------------------------------------------- #
# The store: an empty one, and one of many sessions (cached)
# --------------------------------------------------------------------------- #


def make_empty(binary: str, root: Path, cwd: Path, log: Path) -> Path:
    """A data directory whose database the binary created and migrated, with no session."""
    data = root / "empty-pristine"
    peer = Peer([binary, "acp"], pincer_env(root, data), cwd, log)
    try:
        peer.send(ACP_INITIALIZE)
        peer.wait_response(1)
    finally:
        peer.close()
    if not (data / "pincer.db").exists():
        raise BenchError(f"{data}/pincer.db was not created ({log})")
    return data


def workspace_of(index: int, workspaces: int) -> int:
    """Which workspace the index-th session goes to: 1 % to the first, 30 % to
    the second, the rest spread over the others (deterministic)."""
    r = random.Random(index).random()
    if workspaces < 3:
        return index % workspaces
    if r < 0.01:
        return 0
    if r < 0.31:
        return 1
    return 2 + index % (workspaces - 2)


def seed(binary: str, dest: Path, sessions: int, workspaces: int, window: int, log: Path, say) -> dict:
    """Creates `sessions` sessions through `pincer acp` in dest/data."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ws_dirs = [dest / "ws" / f"ws-{k:02}" for k in range(workspaces)]
    for d in ws_dirs:
        d.mkdir(parents=True)
    script = dest / "model.jsonl"
    script.write_text(json.dumps([
        {"text": "Looked at it: "},
        {"text": "done."},
        {"usage": {"input_tokens": 900, "output_tokens": 12}},
    ]) + "\n")
    data = dest / "data"
    env = pincer_env(dest, data)
    peer = Peer([binary, "acp", "--script", str(script)], env, dest, log)
    counts = [0] * workspaces
    t0 = time.perf_counter()
    try:
        peer.send(ACP_INITIALIZE)
        peer.wait_response(1)
        # Each slot goes new -> prompt -> close, then takes the next session.
        pending: dict[int, tuple[str, int, str | None]] = {}  # request id -> (step, index, session id)
        started = 0
        done = 0

        def start(index: int) -> None:
            k = workspace_of(index, workspaces)
            counts[k] += 1
            rid = peer.request("session/new", {"cwd": str(ws_dirs[k]), "mcpServers": []})
            pending[rid] = ("new", index, None)

        while started < min(window, sessions):
            start(started)
            started += 1
        last_report = time.perf_counter()
        while pending:
            message, _ = peer.read_message()
            rid = message.get("id")
            if rid not in pending or "method" in message:
                continue
            step, index, session_id = pending.pop(rid)
            if "error" in message:
                raise RpcError(rid, message["error"])
            if step == "new":
                session_id = message["result"]["sessionId"]
                text = f"{PROMPTS[index % len(PROMPTS)]} (#{index})"
                rid = peer.request("session/prompt", {
                    "sessionId": session_id, "prompt": [{"type": "text", "text": text}],
                })
                pending[rid] = ("prompt", index, session_id)
            elif step == "prompt":
                if message["result"].get("stopReason") != "end_turn":
                    raise BenchError(f"prompt of session {index} ended {message['result']}")
                rid = peer.request("session/close", {"sessionId": session_id})
                pending[rid] = ("close", index, session_id)
            else:
                done += 1
                if started < sessions:
                    start(started)
                    started += 1
                now = time.perf_counter()
                if now - last_report > 10.0:
                    last_report = now
                    say(f"  {done:,} of {sessions:,} sessions ({done / (now - t0):,.0f}/s)")
    finally:
        peer.close(grace=60.0)
    seconds = time.perf_counter() - t0
    return {
        "sessions": sessions,
        "workspaces": [str(d) for d in ws_dirs],
        "per_workspace": counts,
        "seed_seconds": seconds,
        "window": window,
        "db_bytes": sum(f.stat().st_size for f in data.iterdir() if f.is_file()),
    }


def default_cache() -> Path:
    """bench-sessions/ in Cargo's target directory ($CARGO_TARGET_DIR, else target/ of this repository)."""
    target = os.environ.get("CARGO_TARGET_DIR")
    return Path(target or Path(__file__).resolve().parent.parent / "target") / "bench-sessions"


def cached_store(binary: str, args, root: Path, empty: Path, log: Path, say) -> tuple[Path, dict]:
    """The cached many-session store for this binary, seeded if missing."""
    version = pincer_version(binary)
    schema = schema_version(empty / "pincer.db")
    key = re.sub(r"[^A-Za-z0-9.]+", "-", f"{version}-schema{schema}-{args.sessions}x{args.workspaces}-layout{LAYOUT}")
    cache = Path(args.cache) if args.cache else default_cache()
    dest = cache / key
    meta_path = dest / "meta.json"
    if meta_path.exists() and not args.reseed:
        meta = json.loads(meta_path.read_text())
        meta["reused"] = True
        say(f"reusing the store of {meta['sessions']:,} sessions in {dest}")
        return dest / "data", meta
    say(f"seeding {args.sessions:,} sessions through `pincer acp` into {dest} ...")
    meta = seed(binary, dest, args.sessions, args.workspaces, args.window, log, say)
    meta.update({"key": key, "pincer_version": version, "schema": schema,
                 "seeded": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                 "loadavg_after_seed": loadavg()})
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    meta["reused"] = False
    say(f"seeded in {meta['seed_seconds']:.1f} s ({args.sessions / meta['seed_seconds']:,.0f} sessions/s)")
    return dest / "data", meta


# --------------------------------------------------------------------------- #
# Measurements
# --------------------------------------------------------------------------- #


def startup_once(binary: str, env: dict[str, str], cwd: Path, log: Path) -> tuple[float, float]:
    """A fresh process: ms from spawn to the initialize response, and from
    writing session/new to its response."""
    peer = Peer([binary, "acp"], env, cwd, log)
    try:
        peer.send(ACP_INITIALIZE)
        _, t_init = peer.wait_response(1)
        t0 = time.perf_counter()
        rid = peer.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        _, t_new = peer.wait_response(rid)
        return (t_init - peer.t_spawn) * 1000.0, (t_new - t0) * 1000.0
    finally:
        peer.close()


def startup(binary: str, root: Path, empty: Path, many: Path, n: int, cwd: Path, log: Path, say) -> dict:
    """initialize and session/new, n times each against the empty store and the
    many-session one, alternating which goes first."""
    empty_data = root / "empty"
    many_env = pincer_env(root, many)
    times = {"empty": ([], []), "many": ([], [])}

    def one(which: str, record: bool) -> None:
        if which == "empty":
            copy_data(empty, empty_data)
            env = pincer_env(root, empty_data)
        else:
            env = many_env
        init_ms, new_ms = startup_once(binary, env, cwd, log)
        if record:
            times[which][0].append(init_ms)
            times[which][1].append(new_ms)

    # Unmeasured warm-up: migrates a store cached by an older schema, warms the page cache.
    for _ in range(3):
        one("empty", False)
        one("many", False)
    for i in range(n):
        order = ("empty", "many") if i % 2 == 0 else ("many", "empty")
        for which in order:
            one(which, True)
        if (i + 1) % 50 == 0:
            say(f"  {i + 1} of {n}")
    return {
        which: {"initialize": summary(init), "session_new": summary(new)}
        for which, (init, new) in times.items()
    }


def walk(peer: Peer, params: dict) -> tuple[list[float], list[dict]]:
    """Every page of session/list: each page's ms, and the sessions in order."""
    page_ms, seen, cursor = [], [], None
    while True:
        request = dict(params)
        if cursor is not None:
            request["cursor"] = cursor
        t0 = time.perf_counter()
        rid = peer.request("session/list", request)
        result, at = peer.wait_response(rid)
        page_ms.append((at - t0) * 1000.0)
        seen.extend(result["sessions"])
        cursor = result.get("nextCursor")
        if not cursor:
            return page_ms, seen
        if len(result["sessions"]) != PAGE:
            raise BenchError(f"a page of {len(result['sessions'])} sessions has a nextCursor")


def check_walk(seen: list[dict], expected: int, what: str) -> None:
    ids = [s["sessionId"] for s in seen]
    if len(set(ids)) != len(ids):
        raise BenchError(f"{what}: {len(ids) - len(set(ids))} sessions listed twice")
    if len(ids) != expected:
        raise BenchError(f"{what}: {len(ids)} sessions listed, {expected} stored")
    keys = [(s["updatedAt"], s["sessionId"]) for s in seen]
    if any(a < b for a, b in zip(keys, keys[1:])):
        raise BenchError(f"{what}: not newest first")


def listing(binary: str, root: Path, many: Path, meta: dict, walks: int, cwd: Path, log: Path, say) -> dict:
    """Walks of every page, all sessions and filtered by two workspaces."""
    data = root / "list"
    copy_data(many, data)
    peer = Peer([binary, "acp"], pincer_env(root, data), cwd, log)
    results = {}
    try:
        peer.send(ACP_INITIALIZE)
        peer.wait_response(1)
        cases = [
            ("all", {}, meta["sessions"]),
            ("cwd_rare", {"cwd": meta["workspaces"][0]}, meta["per_workspace"][0]),
            ("cwd_common", {"cwd": meta["workspaces"][1]}, meta["per_workspace"][1]),
        ]
        for name, params, expected in cases:
            say(f"  session/list {name}: {walks} walks ...")
            pages, firsts, lasts, walk_ms = [], [], [], []
            first_page_cold = None
            for w in range(walks):
                page_ms, seen = walk(peer, params)
                check_walk(seen, expected, f"session/list {name} walk {w + 1}")
                if first_page_cold is None:
                    first_page_cold = page_ms[0]
                pages.extend(page_ms)
                firsts.extend(page_ms[:10])
                lasts.extend(page_ms[-10:])
                walk_ms.append(sum(page_ms))
            results[name] = {
                "sessions": expected,
                "pages": len(page_ms),
                "page": summary(pages),
                "first10_mean": statistics.fmean(firsts),
                "last10_mean": statistics.fmean(lasts),
                "walk_ms_median": statistics.median(walk_ms),
                "first_page_of_process_ms": first_page_cold if name == "all" else None,
            }
    finally:
        peer.close()
    return results


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
    root = Path(tempfile.mkdtemp(prefix="pincer-bench-sessions-", dir=args.tmp))
    cwd = root / "ws"
    cwd.mkdir()
    log = root / "stderr.log"

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    results: dict = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "pincer_version": pincer_version(binary),
        "git": git_revision(binary),
        "built": _dt.datetime.fromtimestamp(os.stat(binary).st_mtime).astimezone().isoformat(timespec="seconds"),
        "bin": args.bin,
        "n": args.n,
        "walks": args.walks,
    }
    try:
        empty = make_empty(binary, root, cwd, log)
        many, meta = cached_store(binary, args, root, empty, log, say)
        results["store"] = meta
        if args.wait_idle > 0:
            results["busy_before"] = wait_idle(args.wait_idle, say)
        else:
            results["busy_before"] = cpu_busy(1.0)
        results["machine"] = machine_info()
        say("session/list walks ...")
        results["list"] = listing(binary, root, many, meta, args.walks, cwd, log, say)
        say(f"initialize + session/new x{args.n}, empty and {meta['sessions']:,} sessions ...")
        many_copy = root / "many"
        copy_data(many, many_copy)
        results["startup"] = startup(binary, root, empty, many_copy, args.n, cwd, log, say)
        results["busy_after"] = cpu_busy(1.0)
        results["loadavg_after"] = loadavg()
    finally:
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return results


def report(r: dict) -> str:
    m = r["machine"]
    s = r["store"]
    out = []
    out.append(f"Measured {r['date']} with `scripts/bench_sessions.py` against {r['pincer_version']} "
               f"(`{r['bin']}`, built {r['built']}; work tree at `{r['git']}`).")
    out.append("")
    out.append(
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} RAM, Linux {m['kernel']}, "
        f"Python {m['python']}. Other work on the machine: load average {m['loadavg']} at the start, "
        f"{r['loadavg_after']} at the end; CPUs {r['busy_before']:.0f}% busy in the second before, "
        f"{r['busy_after']:.0f}% in the second after (figures are noisier when these are high)."
    )
    out.append("")
    how = "reused from the cache" if s["reused"] else "seeded for this run"
    out.append(
        f"Store: {s['sessions']:,} sessions ({how}; seeded {s['seeded']} through `pincer acp` in "
        f"{s['seed_seconds']:.0f} s, {s['sessions'] / s['seed_seconds']:,.0f} sessions/s with {s['window']} in flight), "
        f"{len(s['workspaces'])} workspaces holding {', '.join(f'{c:,}' for c in s['per_workspace'][:2])} and "
        f"{min(s['per_workspace'][2:] or [0]):,}–{max(s['per_workspace'][2:] or [0]):,} sessions; "
        f"{s['db_bytes'] / 1024 / 1024:.1f} MiB of database."
    )
    out.append("")
    st = r["startup"]
    out.append("| measure (n = {}) | store | p50 | p95 | p99 | max |".format(st["empty"]["initialize"]["n"]))
    out.append("| --- | --- | ---: | ---: | ---: | ---: |")
    for key, label in (("initialize", "spawn → `initialize` response"),
                       ("session_new", "`session/new` request → response")):
        for which, name in (("empty", "empty"), ("many", f"{s['sessions']:,} sessions")):
            v = st[which][key]
            out.append(f"| {label} | {name} | {fmt_ms(v['p50'])} | {fmt_ms(v['p95'])} | {fmt_ms(v['p99'])} "
                       f"| {fmt_ms(v['max'])} |")
        e, k = st["empty"][key], st["many"][key]
        out.append(f"| … ratio | {s['sessions']:,} ÷ empty | {k['p50'] / e['p50']:.3f} | {k['p95'] / e['p95']:.3f} "
                   f"| {k['p99'] / e['p99']:.3f} | — |")
    out.append("")
    out.append("| `session/list`, 50 a page | sessions | pages | page p50 | page p99 | page max "
               "| first 10 pages, mean | last 10 pages, mean | whole walk, median |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    names = {"all": "all", "cwd_rare": "`cwd` of the 1 % workspace", "cwd_common": "`cwd` of the 30 % workspace"}
    for name, v in r["list"].items():
        p = v["page"]
        out.append(f"| {names[name]} ({r['walks']} walks) | {v['sessions']:,} | {v['pages']} | {fmt_ms(p['p50'])} "
                   f"| {fmt_ms(p['p99'])} | {fmt_ms(p['max'])} | {fmt_ms(v['first10_mean'])} "
                   f"| {fmt_ms(v['last10_mean'])} | {fmt_ms(v['walk_ms_median'])} |")
    out.append("")
    out.append(f"The first page a process answers: {fmt_ms(r['list']['all']['first_page_of_process_ms'])}.")
    out.append("")
    out.append("| target | result | verdict |")
    out.append("| --- | --- | --- |")
    for key, label in (("initialize", "`initialize`"), ("session_new", "`session/new`")):
        e, k = st["empty"][key], st["many"][key]
        ratio = k["p50"] / e["p50"]
        out.append(f"| {label} with {s['sessions']:,} sessions within 10 % of an empty store's (p50) "
                   f"| {fmt_ms(k['p50'])} vs {fmt_ms(e['p50'])} ({(ratio - 1) * 100:+.1f} %) "
                   f"| {verdict(ratio <= TARGET_RATIO)} |")
    worst = max(v["page"]["max"] for v in r["list"].values())
    worst_p99 = max(v["page"]["p99"] for v in r["list"].values())
    out.append(f"| every `session/list` page under {TARGET_PAGE_MS:.0f} ms | p99 {fmt_ms(worst_p99)}, "
               f"max {fmt_ms(worst)} (worst of the three walks) | {verdict(worst < TARGET_PAGE_MS)} |")
    out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="target/release/pincer", help="pincer binary (default: %(default)s)")
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions in the store (default: %(default)s)")
    parser.add_argument("--workspaces", type=int, default=20, help="workspaces they are spread over (default: %(default)s)")
    parser.add_argument("--window", type=int, default=16,
                        help="sessions in flight at once while seeding (default: %(default)s)")
    parser.add_argument("-n", type=int, default=200,
                        help="start-up runs against each store (default: %(default)s)")
    parser.add_argument("--walks", type=int, default=5, help="walks of every session/list page (default: %(default)s)")
    parser.add_argument("--cache", default=None,
                        help="where seeded stores are kept (default: bench-sessions/ in $CARGO_TARGET_DIR, else target/)")
    parser.add_argument("--reseed", action="store_true", help="seed the store again even if cached")
    parser.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                        help="first wait up to this long for the CPUs to be at most 10%% busy (default: no wait)")
    parser.add_argument("--tmp", default=None, help="where the scratch directory goes (default: $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    try:
        results = run(args)
    except BenchError as err:
        print(f"bench_sessions: {err}", file=sys.stderr)
        return 1
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
