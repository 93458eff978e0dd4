#!/usr/bin/env python3
"""Soak `pincer acp` with mutated frames, and measure what made-up sessions cost.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`.

Measures
  1. throughput and memory under a flood of mutated frames (the kinds
     tests/it/acp_fuzz.rs sends: random bytes, invalid UTF-8, truncated and deeply
     nested JSON, odd ids, every ACP method with mutated params, made-up session
     ids, huge strings), with a `session/list` probe every 1,000 frames that
     must be answered: frames per second from the first frame to the last
     probe's answer, VmHWM (peak resident memory) from /proc/PID/status, the
     longest error text seen, and that every answered id was one sent;
  2. VmRSS before and after 100,000 frames naming sessions that never existed
     (half `session/cancel` notifications, half `session/set_mode` requests,
     each answered -32002), after a warm-up round of the same.

With --hostile, instead of both: the same mutated frames while the agent
works. `pincer acp --script` (a model script whose turns wait --turn-ms before
answering, so runs overlap) keeps --sessions sessions live (each 1,000 frames
close a few and open as many), and every --burst-every frames a burst of one
`session/prompt` per live session starts that many runs at once, --big of them
with a prompt of 1 to 6 MB; a burst's prompts are answered before the next
burst starts (one still unanswered after --settle-s without any answer is
counted as never answered, and fails the report). Reports VmHWM, VmRSS at the
end, frames/s, the runs answered and the prompts never answered.

Prints a Markdown report.

    python3 scripts/bench_acp_soak.py --bin target/release/pincer
    python3 scripts/bench_acp_soak.py --frames 1000000 --unknown 100000
    python3 scripts/bench_acp_soak.py --hostile --frames 200000 --sessions 1500
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time

METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/prompt",
    "session/set_config_option",
    "session/set_mode",
    "_pincer/runs/list",
    "_pincer/runs/get",
    "_pincer/runs/tape",
    "_pincer/grants/list",
    "session/cancel",
    "$/cancel_request",
]

ODD_IDS = [
    "123456789012345678901234567890",
    "-9223372036854775809",
    "9223372036854775808",
    "1.5",
    "1e3",
    "-0.0",
    "true",
    "[1]",
    '{"a":1}',
    "1E400",
]


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


class Agent:
    """`pincer acp` in a fresh directory, its answers read by a thread."""

    def __init__(self, binary: str, args: list[str] | None = None, env_extra: dict | None = None) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="pincer-soak-")
        root = self.dir.name
        self.workspace = os.path.join(root, "ws")
        os.makedirs(self.workspace)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.path.join(root, "home"),
            "XDG_CONFIG_HOME": os.path.join(root, "config"),
            "PINCER_DATA_DIR": os.path.join(root, "data"),
            "RUST_LOG": "pincer=info",
        }
        env.update(env_extra or {})
        self.stderr = open(os.path.join(root, "stderr.log"), "wb")
        self.proc = subprocess.Popen(
            [os.path.abspath(binary), "acp", *(args or [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=root,
            bufsize=1 << 16,
        )
        self.answers: queue.Queue[tuple[str | None, dict]] = queue.Queue()
        # Answers to ids starting `new-` (sessions opened) and `run-`
        # (prompts), kept for the hostile mode.
        self.opened: queue.Queue[dict] = queue.Queue()
        self.ran: queue.Queue[dict] = queue.Queue()
        self.answered = 0
        self.errors = 0
        self.longest_error = 0
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a wrapper's own words (heaptrack's, say)
            if "method" in message:
                continue
            error = message.get("error")
            with self.lock:
                self.answered += 1
                if error is not None:
                    self.errors += 1
                    size = len(error.get("message", "")) + len(json.dumps(error.get("data")))
                    self.longest_error = max(self.longest_error, size)
            probe = message.get("id")
            if isinstance(probe, str) and probe.startswith("probe-"):
                self.answers.put((probe, message))
            elif isinstance(probe, str) and probe.startswith("new-"):
                self.opened.put(message)
            elif isinstance(probe, str) and probe.startswith("run-"):
                self.ran.put(message)

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)

    def call(self, probe: str, method: str, params: dict) -> dict:
        line = json.dumps({"jsonrpc": "2.0", "id": probe, "method": method, "params": params})
        self.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            got, message = self.answers.get(timeout=300)
            if got == probe:
                return message

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.stderr.close()
        self.dir.cleanup()
        return code


class Frames:
    """Mutated frames, as tests/it/acp_fuzz.rs makes them (a close port)."""

    def __init__(self, seed: int, session: str, workspace: str) -> None:
        self.rng = random.Random(seed)
        self.session = session
        self.workspace = workspace
        self.next_id = 0

    def made_up(self) -> str:
        return "ses_%016x" % self.rng.getrandbits(64)

    def huge(self) -> str:
        size = 1 << 20 if self.rng.randrange(256) == 0 else self.rng.randrange(200, 5000)
        return self.rng.choice("abcxyz") * size

    def any_value(self, depth: int = 0):
        k = self.rng.randrange(12)
        if k == 0:
            return None
        if k == 1:
            return self.rng.random() < 0.5
        if k == 2:
            return self.rng.randrange(-(2**63), 2**63)
        if k == 3:
            return self.rng.random() * 1e300
        if k == 4:
            return self.huge()
        if k == 5:
            return self.made_up()
        if k == 6:
            return "../relative/path"
        if k == 7 and depth < 4:
            return [self.any_value(depth + 1) for _ in range(3)]
        if k == 8 and depth < 4:
            return {"sessionId": self.any_value(depth + 1)}
        if k == 9:
            return self.session
        return "x"

    def template(self, method: str) -> dict:
        session = self.session if self.rng.random() < 0.5 else self.made_up()
        return {
            "initialize": {"protocolVersion": 1, "clientCapabilities": {}},
            "authenticate": {"methodId": "none"},
            "session/new": {"cwd": "relative/dir", "mcpServers": []},
            "session/load": {"sessionId": session, "cwd": self.workspace, "mcpServers": []},
            "session/resume": {"sessionId": session, "cwd": self.workspace, "mcpServers": []},
            "session/list": {"cursor": "1:ses_x"},
            "session/close": {"sessionId": self.made_up()},
            "session/prompt": {
                "sessionId": session,
                "prompt": [{"type": "audio", "data": "", "mimeType": "audio/wav"}],
            },
            "session/set_config_option": {"sessionId": session, "configId": "mode", "value": "nonsense"},
            "session/set_mode": {"sessionId": session, "modeId": "nonsense"},
            "_pincer/runs/list": {"sessionId": session},
            "_pincer/grants/list": {"sessionId": session},
            "_pincer/runs/get": {"runId": "run_made_up"},
            "_pincer/runs/tape": {"runId": "run_made_up"},
            "session/cancel": {"sessionId": session},
            "$/cancel_request": {"requestId": self.rng.randrange(-(2**63), 2**63)},
        }[method]

    def mutate(self, params):
        for _ in range(self.rng.randrange(3)):
            if not isinstance(params, dict):
                break
            k = self.rng.randrange(4)
            keys = list(params)
            if k == 0 and keys:
                del params[self.rng.choice(keys)]
            elif k == 1 and keys:
                params[self.rng.choice(keys)] = self.any_value()
            elif k == 2:
                params["unknownField"] = self.any_value()
            else:
                params = self.any_value()
        return params

    def valid_id(self) -> str:
        self.next_id += 1
        n = self.next_id
        k = self.rng.randrange(4)
        if k == 0:
            return str(2**63 - 1 - n)
        if k == 1:
            return f"-{n}"
        if k == 2:
            return f'"f{n}"'
        return str(n)

    def frame(self) -> bytes:
        k = self.rng.randrange(100)
        if k < 5:
            return bytes(b if b != 10 else 32 for b in self.rng.randbytes(self.rng.randrange(200)))
        if k < 10:
            return b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"cursor":"\xff\xfe\xc3("}}'
        if k < 15:
            text = b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/x","mcpServers":[]}}'
            return text[: self.rng.randrange(1, len(text))]
        if k < 20:
            depth = self.rng.randrange(1, 20000)
            nested = "[" * depth + "]" * depth
            if self.rng.random() < 0.5:
                return (
                    '{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":%s}'
                    % (self.valid_id(), nested)
                ).encode()
            return nested.encode()
        if k < 30:
            return ('{"jsonrpc":"2.0","id":%s,"method":"%s","params":{}}' % (
                self.rng.choice(ODD_IDS), self.rng.choice(METHODS))).encode()
        if k < 35:
            body = self.rng.choice(['"result":null', '"result":{}', '"error":{"code":-1,"message":"no"}', '"error":null'])
            return ('{"jsonrpc":"2.0","id":%d,%s}' % (self.rng.randrange(1000), body)).encode()
        if k == 35:
            return ('{"jsonrpc":"2.0","id":%s,"method":"%s"}' % (self.valid_id(), self.huge())).encode()
        if k < 55:
            method = "session/cancel" if self.rng.random() < 0.5 else "session/anything"
            return json.dumps({"jsonrpc": "2.0", "method": method, "params": {"sessionId": self.made_up()}}).encode()
        method = self.rng.choice(METHODS)
        params = self.mutate(self.template(method))
        if method in ("session/cancel", "$/cancel_request"):
            return json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode()
        return ('{"jsonrpc":"2.0","id":%s,"method":"%s","params":%s}' % (
            self.valid_id(), method, json.dumps(params))).encode()


def soak(binary: str, frames: int, seed: int) -> dict:
    agent = Agent(binary)
    opened = agent.call("probe-open", "session/new", {"cwd": agent.workspace, "mcpServers": []})
    session = opened["result"]["sessionId"]
    gen = Frames(seed, session, agent.workspace)
    started = time.monotonic()
    batch = []
    for n in range(frames):
        batch.append(gen.frame())
        if (n + 1) % 1000 == 0:
            agent.write(b"\n".join(batch) + b"\n")
            batch = []
            answer = agent.call(f"probe-{n}", "session/list", {})
            if not isinstance(answer.get("result", {}).get("sessions"), list):
                raise SystemExit(f"probe after {n + 1} frames failed: {answer}")
    if batch:
        agent.write(b"\n".join(batch) + b"\n")
        agent.call("probe-last", "session/list", {})
    elapsed = time.monotonic() - started
    pid = agent.proc.pid
    result = {
        "frames": frames,
        "seconds": elapsed,
        "frames_per_second": frames / elapsed,
        "vmhwm_kib": status_kib(pid, "VmHWM:"),
        "vmrss_kib": status_kib(pid, "VmRSS:"),
        "answers": agent.answered,
        "errors": agent.errors,
        "longest_error": agent.longest_error,
    }
    result["exit"] = agent.close()
    return result


def hostile(binary: str, frames: int, seed: int, sessions: int, burst_every: int,
            big: int, turn_ms: int, churn: int, env: dict, settle_s: int) -> dict:
    """The soak's frames while ~`sessions` sessions live and bursts of runs work."""
    with tempfile.TemporaryDirectory(prefix="pincer-hostile-") as scratch:
        script = os.path.join(scratch, "slow.jsonl")
        with open(script, "w") as f:
            # A turn per prompt a session can get; past them a turn fails at once.
            for _ in range(frames // max(burst_every, 1) + 64):
                f.write(json.dumps([{"delay_ms": turn_ms}, {"text": "ok"}]) + "\n")
        agent = Agent(binary, ["--script", script], env)
        rng = random.Random(seed ^ 0x4057)
        vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randrange(2, 11)))
                      for _ in range(5000)]
        next_id = 0

        def open_sessions(count: int) -> list[str]:
            nonlocal next_id
            lines = []
            for _ in range(count):
                next_id += 1
                lines.append(json.dumps({"jsonrpc": "2.0", "id": f"new-{next_id}", "method": "session/new",
                                         "params": {"cwd": agent.workspace, "mcpServers": []}}).encode())
            agent.write(b"\n".join(lines) + b"\n")
            agent.proc.stdin.flush()
            opened = []
            for _ in range(count):
                answer = agent.opened.get(timeout=120)
                if "result" not in answer:
                    raise SystemExit(f"session/new failed: {answer}")
                opened.append(answer["result"]["sessionId"])
            return opened

        live: list[str] = []
        while len(live) < sessions:
            live.extend(open_sessions(min(500, sessions - len(live))))
        gen = Frames(seed, live[0], agent.workspace)
        prompts = 0
        answered = 0
        outstanding = 0
        big_bytes = 0
        started = time.monotonic()
        pending: dict[str, tuple[str, int]] = {}
        closed: set[str] = set()

        lost: list[tuple[str, str]] = []

        def settle() -> None:
            """Waits for the burst's answers; a prompt unanswered after a
            quiet --settle-s is counted as never answered (and reported)."""
            nonlocal answered, outstanding
            waited = 0
            while outstanding:
                try:
                    answer = agent.ran.get(timeout=5)
                except queue.Empty:
                    waited += 5
                    if waited >= settle_s:
                        lost.extend((k, v[0]) for k, v in pending.items())
                        print(f"  {outstanding:,} prompts not answered after {waited} s of silence: "
                              f"{[(k, v[0], v[0] in closed) for k, v in pending.items()][:4]}",
                              file=sys.stderr, flush=True)
                        pending.clear()
                        outstanding = 0
                    continue
                waited = 0
                outstanding -= 1
                pending.pop(answer.get("id"), None)
                if "result" in answer:
                    answered += 1

        def burst() -> None:
            nonlocal prompts, outstanding, big_bytes, next_id
            settle()
            print(f"  {time.monotonic() - started:7.1f} s: burst after {prompts:,} prompts, {answered:,} answered; "
                  f"VmHWM {status_kib(agent.proc.pid, 'VmHWM:') / 1024:.1f} MiB", file=sys.stderr, flush=True)
            heavy = set(rng.sample(range(len(live)), min(big, len(live))))
            for index, session in enumerate(live):
                next_id += 1
                if index in heavy:
                    # Words of a made-up language, as a pasted file reads.
                    size = rng.randrange(1 << 20, 6 << 20)
                    text = " ".join(rng.choices(vocabulary, k=size // 7))
                    big_bytes += len(text)
                else:
                    text = f"prompt {next_id}: say ok"
                line = json.dumps({"jsonrpc": "2.0", "id": f"run-{next_id}", "method": "session/prompt",
                                   "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
                agent.write(line.encode() + b"\n")
                pending[f"run-{next_id}"] = (session, len(text))
                prompts += 1
                outstanding += 1
            agent.proc.stdin.flush()

        batch = []
        for n in range(frames):
            if n % burst_every == 0:
                burst()
            gen.session = live[rng.randrange(len(live))]
            batch.append(gen.frame())
            if (n + 1) % 1000 == 0:
                agent.write(b"\n".join(batch) + b"\n")
                batch = []
                gone = [live.pop(rng.randrange(len(live))) for _ in range(min(churn, len(live)))]
                for session in gone:
                    closed.add(session)
                    next_id += 1
                    agent.write(json.dumps({"jsonrpc": "2.0", "id": f"close-{next_id}", "method": "session/close",
                                            "params": {"sessionId": session}}).encode() + b"\n")
                if gone:
                    live.extend(open_sessions(len(gone)))
                answer = agent.call(f"probe-{n}", "session/list", {})
                if not isinstance(answer.get("result", {}).get("sessions"), list):
                    raise SystemExit(f"probe after {n + 1} frames failed: {answer}")
        if batch:
            agent.write(b"\n".join(batch) + b"\n")
        settle()
        agent.call("probe-last", "session/list", {})
        elapsed = time.monotonic() - started
        pid = agent.proc.pid
        result = {
            "frames": frames,
            "sessions": sessions,
            "prompts": prompts,
            "runs_answered": answered,
            "never_answered": len(lost),
            "big_mib": big_bytes / (1 << 20),
            "seconds": elapsed,
            "frames_per_second": frames / elapsed,
            "vmhwm_kib": status_kib(pid, "VmHWM:"),
            "vmrss_kib": status_kib(pid, "VmRSS:"),
            "answers": agent.answered,
        }
        result["exit"] = agent.close()
        return result


def unknown_sessions(binary: str, count: int) -> dict:
    agent = Agent(binary)

    def round_(start: int) -> None:
        lines = []
        for n in range(start, start + count):
            session = f"ses_made_up_{n}"
            if n % 2 == 0:
                msg = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}
            else:
                msg = {"jsonrpc": "2.0", "id": n, "method": "session/set_mode",
                       "params": {"sessionId": session, "modeId": "full"}}
            lines.append(json.dumps(msg).encode())
            if len(lines) == 1000:
                agent.write(b"\n".join(lines) + b"\n")
                lines = []
        if lines:
            agent.write(b"\n".join(lines) + b"\n")
        agent.call(f"probe-{start}", "session/list", {})

    round_(0)
    before = status_kib(agent.proc.pid, "VmRSS:")
    started = time.monotonic()
    round_(count)
    elapsed = time.monotonic() - started
    after = status_kib(agent.proc.pid, "VmRSS:")
    result = {
        "count": count,
        "before_kib": before,
        "after_kib": after,
        "seconds": elapsed,
        "vmhwm_kib": status_kib(agent.proc.pid, "VmHWM:"),
    }
    result["exit"] = agent.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/pincer")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--unknown", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0x5EEDACB1)
    parser.add_argument("--hostile", action="store_true", help="the frames while sessions live and runs work")
    parser.add_argument("--sessions", type=int, default=1500, help="--hostile: sessions kept live")
    parser.add_argument("--burst-every", type=int, default=20_000, help="--hostile: frames between bursts of runs")
    parser.add_argument("--big", type=int, default=2, help="--hostile: prompts of 1-6 MB in each burst")
    parser.add_argument("--turn-ms", type=int, default=300, help="--hostile: how long each model turn waits")
    parser.add_argument("--churn", type=int, default=5, help="--hostile: sessions closed and opened per 1,000 frames")
    parser.add_argument("--settle-s", type=int, default=60,
                        help="--hostile: seconds without an answer before a burst's missing ones count as lost")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="--hostile: an environment variable for the agent (MALLOC_ARENA_MAX=2, say)")
    args = parser.parse_args()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    mib = lambda kib: kib / 1024  # noqa: E731
    if args.hostile:
        got = hostile(args.bin, args.frames, args.seed, args.sessions, args.burst_every,
                      args.big, args.turn_ms, args.churn, dict(v.split("=", 1) for v in args.env),
                      args.settle_s)
        after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        print(f"- binary `{args.bin}`{''.join(f', `{v}`' for v in args.env)}; machine load before: `{load}`; after: `{after}`")
        print(f"- {got['frames']:,} frames with {got['sessions']:,} sessions live, {got['prompts']:,} prompts "
              f"({got['runs_answered']:,} runs answered, {got['never_answered']:,} prompts never answered, "
              f"{got['big_mib']:.0f} MiB in big prompts) in "
              f"{got['seconds']:.1f} s: **{got['frames_per_second']:,.0f} frames/s**; "
              f"**VmHWM {mib(got['vmhwm_kib']):.1f} MiB**, VmRSS at the end {mib(got['vmrss_kib']):.1f} MiB; "
              f"exit {got['exit']}")
        ok = got["vmhwm_kib"] < 128 * 1024 and got["exit"] == 0 and not got["never_answered"]
        print(f"- target (VmHWM < 128 MiB, every prompt answered): {'met' if ok else 'NOT met'}")
        sys.exit(0 if ok else 1)
    soaked = soak(args.bin, args.frames, args.seed)
    unknown = unknown_sessions(args.bin, args.unknown)
    print(f"- machine load before: `{load}`")
    print(f"- {soaked['frames']:,} frames in {soaked['seconds']:.1f} s: "
          f"**{soaked['frames_per_second']:,.0f} frames/s**; {soaked['answers']:,} answers "
          f"({soaked['errors']:,} errors, longest error text {soaked['longest_error']} bytes); "
          f"**VmHWM {mib(soaked['vmhwm_kib']):.1f} MiB**, VmRSS at the end {mib(soaked['vmrss_kib']):.1f} MiB; "
          f"exit {soaked['exit']}")
    grown = unknown["after_kib"] - unknown["before_kib"]
    print(f"- {unknown['count']:,} frames naming made-up sessions (after a warm-up round of as many): "
          f"VmRSS {mib(unknown['before_kib']):.1f} MiB before, {mib(unknown['after_kib']):.1f} MiB after "
          f"(**{grown:+d} KiB**), {unknown['seconds']:.1f} s; exit {unknown['exit']}")
    ok = (soaked["frames_per_second"] >= 10_000 and soaked["vmhwm_kib"] < 64 * 1024
          and abs(grown) <= 1024 and soaked["longest_error"] <= 2048)
    print(f"- targets (>= 10,000 frames/s, VmHWM < 64 MiB, growth within 1 MiB, errors <= 2 KB): "
          f"{'met' if ok else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
