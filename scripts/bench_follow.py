#!/usr/bin/env python3
"""How fast a second process sees a session's run that another process works.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`.

Two `pincer acp` processes on one data directory, as two editor windows: A
opens a session and prompts it with a scripted model that streams --chunks
text chunks, --gap-ms apart; B loads the session while the run works and
follows it (its events read from the tape, woken by the journal's notifier,
`core::notify`). For every chunk, the latency is the time from A's client
reading it to B's client reading it (A reads it as the run emits it, before
it is committed, so this includes the commit). Prints p50, p90, p99 and max,
and how many chunks B saw.

    python3 scripts/bench_follow.py --bin target/release/pincer
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


class Acp:
    def __init__(self, binary: str, env: dict, script: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [binary, "acp", "--script", str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
        self.next = 1
        self.lines: list[tuple[float, dict]] = []
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for raw in self.proc.stdout:
            at = time.monotonic()
            with self.lock:
                self.lines.append((at, json.loads(raw)))
                self.lock.notify_all()

    def send(self, message: dict) -> None:
        assert self.proc.stdin
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict, wait: bool = True) -> dict | int:
        rid = self.next
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not wait:
            return rid
        return self.wait(lambda m: m.get("id") == rid and "method" not in m)

    def wait(self, check, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        with self.lock:
            while True:
                for _, message in self.lines[seen:]:
                    if check(message):
                        return message
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no such message")
                self.lock.wait(left)

    def chunks(self) -> dict[str, float]:
        out: dict[str, float] = {}
        with self.lock:
            for at, m in self.lines:
                update = m.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "agent_message_chunk":
                    text = update.get("content", {}).get("text", "")
                    out.setdefault(text, at)
        return out

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/pincer")
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--gap-ms", type=int, default=20)
    args = parser.parse_args()
    binary = str(Path(args.bin).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("home", "config", "data", "ws"):
            (root / d).mkdir()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "PINCER_DATA_DIR": str(root / "data"),
        }
        turn = []
        for i in range(args.chunks):
            turn.append({"text": f"<{i}>"})
            turn.append({"delay_ms": args.gap_ms})
        script = root / "s.jsonl"
        script.write_text(json.dumps(turn) + "\n")
        a = Acp(binary, env, script, root)
        b = Acp(binary, env, script, root)
        try:
            init = {"protocolVersion": 1, "clientCapabilities": {}}
            a.request("initialize", init)
            b.request("initialize", init)
            session = a.request("session/new", {"cwd": str(root / "ws"), "mcpServers": []})["result"]["sessionId"]
            prompt = a.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}, wait=False)
            a.wait(lambda m: m.get("params", {}).get("update", {}).get("content", {}).get("text") == "<0>")
            loaded = b.request("session/load", {"sessionId": session, "cwd": str(root / "ws"), "mcpServers": []})
            assert "result" in loaded, loaded
            a.wait(lambda m: m.get("id") == prompt and "method" not in m, timeout=120)
            last = f"<{args.chunks - 1}>"
            b.wait(lambda m: m.get("params", {}).get("update", {}).get("content", {}).get("text") == last, timeout=30)
            in_a, in_b = a.chunks(), b.chunks()
            # Chunks emitted after B had loaded: those B followed live.
            load_done = max(at for at, m in b.lines if m.get("id") == 2)
            latencies = [
                (in_b[text] - at) * 1000
                for text, at in in_a.items()
                if text in in_b and at > load_done
            ]
            print(f"{args.chunks} chunks {args.gap_ms} ms apart; B saw {len(in_b)} of them, {len(latencies)} emitted after it had loaded")
            print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
            print("| latency, A's client → B's client | ms |")
            print("| --- | ---: |")
            for name, p in (("p50", 50), ("p90", 90), ("p99", 99)):
                print(f"| {name} | {pct(latencies, p):.1f} |")
            print(f"| max | {max(latencies):.1f} |")
            print(f"| mean | {statistics.fmean(latencies):.1f} |")
        finally:
            a.close()
            b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
