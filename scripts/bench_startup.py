#!/usr/bin/env python3
"""Start-up footprint of `pincer acp` beside its peers, measured in one run.

For each server, N times (a new process each time, after two unmeasured
warm-up runs that create its data directory):

  1. the time from spawn to the `initialize` response line read on its stdout;
  2. its peak resident memory (VmHWM from /proc/PID/status) once it has also
     answered the request that opens a session (`session/new`; codex
     app-server: the `initialized` notification, then `thread/start`).

All of it twice: with OPENAI_API_KEY set to a dummy value (as most users have
it) and without. Reported as median and range (min-max) per server, with the
ratios to pincer and the issue's targets.

Peers are optional: codex (`@openai/codex`, its native binary running
`codex app-server`) and ZeroClaw (`zeroclaw acp`, crates.io zeroclaw 0.8.7).
A peer whose binary is absent is skipped with a note.

    python3 scripts/bench_startup.py                     # pincer, and peers found
    python3 scripts/bench_startup.py -n 30 --markdown    # a table for docs/benchmarks.md
    python3 scripts/bench_startup.py --no-peers -n 10 --max-mib 11   # the CI guard

With --max-mib it fails (exit 1) when pincer's median VmHWM through
`session/new`, with the key or without, is over that many MiB: `.ci/run`
guards the release build's start-up so (memory pages are deterministic
enough for a bound; time is not, and is not guarded).

Paths: --bin (default target/release/pincer), --codex or $BENCH_CODEX (the
native binary, the npm wrapper or the npm prefix), --zeroclaw or
$BENCH_ZEROCLAW. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMEOUT_S = 30.0
DUMMY_KEY = "sk-bench-dummy-0000000000000000000000000000"

ZEROCLAW_CONFIG = """schema_version = 3

[providers.models.openai.default]
model = "gpt-4.1-mini"

[risk_profiles.default]

[runtime_profiles.default]

[agents.bench]
enabled = true
model_provider = "openai.default"
risk_profile = "default"
runtime_profile = "default"
"""


class BenchError(Exception):
    pass


class Proc:
    """A server on pipes: newline-delimited JSON in, lines out."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=cwd
        )
        self.buf = b""

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def response(self, request_id: int) -> dict:
        """Reads lines until the response to `request_id`."""
        deadline = time.monotonic() + TIMEOUT_S
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if message.get("id") == request_id and ("result" in message or "error" in message):
                    if "error" in message:
                        raise BenchError(f"request {request_id} failed: {message['error']}")
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"no response to request {request_id} within {TIMEOUT_S} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise BenchError(f"the server closed its stdout (exit {self.proc.poll()})")
                self.buf += chunk

    def vm_hwm_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise BenchError("no VmHWM in /proc status")

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Server:
    """How to start one server and open a session on it."""

    name = ""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self, with_key: bool) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root / "home"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "data"),
            "LANG": "C.UTF-8",
        }
        if with_key:
            env["OPENAI_API_KEY"] = DUMMY_KEY
        return env

    def __init__(self, root: Path):
        self.root = root
        for sub in ("home", "config", "data", "work"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def initialize(self) -> dict:
        raise NotImplementedError

    def open_session(self, proc: Proc) -> None:
        raise NotImplementedError

    def once(self, with_key: bool) -> tuple[float, int]:
        """(ms from spawn to the initialize response, VmHWM KiB after a session opened)."""
        started = time.perf_counter()
        proc = Proc(self.argv(), self.env(with_key), self.root / "work", self.root / "stderr.log")
        try:
            proc.send(self.initialize())
            proc.response(1)
            elapsed = (time.perf_counter() - started) * 1000
            self.open_session(proc)
            return elapsed, proc.vm_hwm_kib()
        finally:
            proc.close()


class Pincer(Server):
    name = "pincer"

    def __init__(self, root: Path, binary: str):
        super().__init__(root)
        self.binary = binary

    def argv(self) -> list[str]:
        return [self.binary, "acp"]

    def env(self, with_key: bool) -> dict[str, str]:
        env = super().env(with_key)
        env["PINCER_DATA_DIR"] = str(self.root / "pincer-data")
        return env

    def initialize(self) -> dict:
        return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}}

    def open_session(self, proc: Proc) -> None:
        proc.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                   "params": {"cwd": str(self.root / "work"), "mcpServers": []}})
        proc.response(2)


class Codex(Server):
    name = "codex app-server"

    def __init__(self, root: Path, binary: str):
        super().__init__(root)
        self.binary = binary

    def argv(self) -> list[str]:
        return [self.binary, "app-server"]

    def env(self, with_key: bool) -> dict[str, str]:
        env = super().env(with_key)
        env["CODEX_HOME"] = str(self.root / "codex-home")
        (self.root / "codex-home").mkdir(exist_ok=True)
        return env

    def initialize(self) -> dict:
        # The app-server protocol omits "jsonrpc".
        return {"id": 1, "method": "initialize",
                "params": {"clientInfo": {"name": "bench", "version": "0"}}}

    def open_session(self, proc: Proc) -> None:
        proc.send({"method": "initialized"})
        proc.send({"id": 2, "method": "thread/start", "params": {"cwd": str(self.root / "work")}})
        proc.response(2)


class ZeroClaw(Server):
    name = "zeroclaw acp"

    def __init__(self, root: Path, binary: str):
        super().__init__(root)
        self.binary = binary
        (root / "zc-config").mkdir(exist_ok=True)
        (root / "zc-config" / "config.toml").write_text(ZEROCLAW_CONFIG)

    def argv(self) -> list[str]:
        return [self.binary, "--config-dir", str(self.root / "zc-config"), "acp"]

    def initialize(self) -> dict:
        return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}}

    def open_session(self, proc: Proc) -> None:
        # Its session/new needs an agent alias from its config.
        proc.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                   "params": {"cwd": str(self.root / "work"), "mcpServers": [], "agentAlias": "bench"}})
        proc.response(2)


def resolve_codex(path: str) -> str:
    """The native codex binary from a binary, the npm wrapper or the npm prefix."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("**/@openai/codex-*/vendor/*/bin/codex")) + sorted(p.glob("**/vendor/*/bin/codex"))
        if not found:
            raise BenchError(f"no native codex binary under {p}")
        return str(found[0])
    if p.is_file() and p.read_bytes()[:4] != b"\x7fELF":
        # The npm wrapper: the native binary sits in the platform package beside it.
        for parent in p.resolve().parents:
            if parent.name == "node_modules":
                return resolve_codex(str(parent))
    return str(p)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/pincer", help="the pincer binary")
    parser.add_argument("--codex", default=os.environ.get("BENCH_CODEX", "/work/peers/codex"),
                        help="codex: native binary, npm wrapper or npm prefix [$BENCH_CODEX]")
    parser.add_argument("--zeroclaw", default=os.environ.get("BENCH_ZEROCLAW", "/work/peers/zeroclaw/bin/zeroclaw"),
                        help="the zeroclaw binary [$BENCH_ZEROCLAW]")
    parser.add_argument("-n", type=int, default=20, help="measured processes per server and key setting")
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--markdown", action="store_true", help="print the result as a Markdown table")
    parser.add_argument("--no-peers", action="store_true", help="measure pincer alone")
    parser.add_argument("--max-mib", type=float,
                        help="fail when pincer's median VmHWM (either setting) is over this many MiB")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="pincer-startup-"))
    notes: list[str] = []
    servers: list[Server] = []
    if not Path(args.bin).is_file():
        print(f"no pincer binary at {args.bin}; run `cargo build --release`", file=sys.stderr)
        return 2
    servers.append(Pincer(scratch / "pincer", str(Path(args.bin).resolve())))
    if not args.no_peers:
        try:
            servers.append(Codex(scratch / "codex", resolve_codex(args.codex)))
        except (BenchError, OSError) as err:
            notes.append(f"codex skipped: {err}")
        if args.zeroclaw and Path(args.zeroclaw).is_file():
            servers.append(ZeroClaw(scratch / "zeroclaw", args.zeroclaw))
        else:
            notes.append(f"zeroclaw skipped: no binary at {args.zeroclaw!r}")
    for server in servers[1:]:
        if not Path(server.binary).is_file():  # type: ignore[attr-defined]
            notes.append(f"{server.name} skipped: no binary at {server.binary}")  # type: ignore[attr-defined]
    servers = [s for s in servers if Path(getattr(s, "binary")).is_file()]

    started_load = load()
    results: dict[str, dict[str, dict]] = {}
    try:
        for with_key in (True, False):
            setting = "key set" if with_key else "no key"
            for server in servers:
                try:
                    for _ in range(2):
                        server.once(with_key)
                    times, peaks = [], []
                    # Interleaving the servers would let one's page cache help
                    # another's; each runs its N in a row, after its warm-up.
                    for _ in range(args.n):
                        ms, hwm = server.once(with_key)
                        times.append(ms)
                        peaks.append(hwm / 1024)
                except BenchError as err:
                    notes.append(f"{server.name} ({setting}) failed: {err}; stderr in {server.root / 'stderr.log'}")
                    continue
                results.setdefault(setting, {})[server.name] = {
                    "initialize_ms": summary(times), "vm_hwm_mib": summary(peaks),
                    "raw_ms": times, "raw_mib": peaks,
                }
    finally:
        ended_load = load()

    if args.json:
        Path(args.json).write_text(json.dumps({"load": [started_load, ended_load], "results": results, "notes": notes}, indent=2))

    out = []
    out.append(f"load average {started_load} before, {ended_load} after; n = {args.n} per server and setting")
    out.append("")
    out.append("| setting | server | spawn → `initialize` answer, median (range) | VmHWM through `session/new`, median (range) | time ÷ pincer | memory ÷ pincer |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: |")
    for setting, by_server in results.items():
        base = by_server.get("pincer")
        for name, r in by_server.items():
            t, m = r["initialize_ms"], r["vm_hwm_mib"]
            ratio_t = f"{t['median'] / base['initialize_ms']['median']:.1f}×" if base and name != "pincer" else "—"
            ratio_m = f"{m['median'] / base['vm_hwm_mib']['median']:.1f}×" if base and name != "pincer" else "—"
            out.append(
                f"| {setting} | {name} | {t['median']:.2f} ms ({t['min']:.2f}–{t['max']:.2f}) "
                f"| {m['median']:.1f} MiB ({m['min']:.1f}–{m['max']:.1f}) | {ratio_t} | {ratio_m} |"
            )
    out.append("")
    targets = []
    for setting, by_server in results.items():
        base = by_server.get("pincer")
        if not base:
            continue
        peak = base["vm_hwm_mib"]["median"]
        targets.append((f"{setting}: pincer peak memory at most 8 MiB", f"{peak:.1f} MiB", peak <= 8.0))
        for name, speed, size in (("codex app-server", 15, 15), ("zeroclaw acp", 5, 5)):
            peer = by_server.get(name)
            if not peer:
                continue
            ft = peer["initialize_ms"]["median"] / base["initialize_ms"]["median"]
            fm = peer["vm_hwm_mib"]["median"] / peak
            targets.append((f"{setting}: at least {speed}× faster than {name}", f"{ft:.1f}×", ft >= speed))
            targets.append((f"{setting}: at least {size}× smaller than {name}", f"{fm:.1f}×", fm >= size))
    if targets:
        out.append("| target | result | verdict |")
        out.append("| --- | --- | --- |")
        for what, result, ok in targets:
            out.append(f"| {what} | {result} | {'met' if ok else '**not met**'} |")
    for note in notes:
        out.append(f"\nNote: {note}")
    failed = []
    if args.max_mib is not None:
        for setting in ("key set", "no key"):
            base = results.get(setting, {}).get("pincer")
            if base is None:
                failed.append(f"{setting}: pincer was not measured")
            elif base["vm_hwm_mib"]["median"] > args.max_mib:
                failed.append(f"{setting}: VmHWM through session/new {base['vm_hwm_mib']['median']:.1f} MiB, "
                              f"over the bound of {args.max_mib:g} MiB")
        out.append("")
        out.append(f"guard (median VmHWM at most {args.max_mib:g} MiB): " + ("; ".join(failed) or "held"))
    print("\n".join(out))
    shutil.rmtree(scratch, ignore_errors=True)
    if failed:
        print("the start-up footprint grew past its bound (docs/benchmarks.md, \"Start-up\"): "
              "find what start-up now touches (scripts/startup_order.py --check, /proc/PID/smaps)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
