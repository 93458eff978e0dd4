#!/usr/bin/env python3
"""Start-up, first model request, catalogue size and memory with 0, 100 and
1,000 Agent Skills installed (issue 30).

For each count, a fresh home and data directory get that many generated
skills (`SKILL.md` folders with descriptions of 150-300 characters and a
short body), half in the project (`WORK/.agents/skills/`, the project then
trusted with `pincer trust` so they are offered) and half in the user's
folder (`HOME/.agents/skills/`). Then, N rounds, each count once in each
round (a new process each time, after one unmeasured warm-up run per count):

  a. the time from spawning `pincer acp` to its `initialize` response line;
  b. the time from the spawn to the first model request's arrival at a
     loopback OpenAI-compatible fake (`session/new`, then `session/prompt`
     sent right after `initialize`; the fake answers with a streamed "ok");
  d. the process's peak resident memory (VmHWM from /proc/PID/status) once
     the prompt is answered;
  e. the wall time of `pincer skills list --json` (a process that discovers
     the skills, reading and parsing each `SKILL.md`, and prints them).

The timed runs use a model name Pincer counts by bytes, so no tokenizer is
loaded. Then, once per count, (c) the catalogue: one more session with
`gpt-4.1-mini` (counted with `o200k_base`) and `pincer context show --json`:
the system prompt's tokens less those with no skills, how many skills are
listed in full and by name only at the default budget (2,000 tokens), the
tokens per skill listed in full; and the same with a budget of 100,000
tokens (every skill in full), the cost of one skill's entry; and what the
`skill` tool's schema (its `name` enum lists every skill) adds to the tools.

    cargo build --release --locked
    python3 scripts/bench_skills.py                 # 0, 100, 1000 skills, n = 15
    python3 scripts/bench_skills.py -n 15 --counts 0,100,1000,3000

Prints a Markdown table; progress on stderr. Standard library only.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import random
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TIMEOUT_S = 60.0
KEY = "sk-bench-dummy-0000000000000000000000000000"
TIMED_MODEL = "bench-model"
COUNTED_MODEL = "gpt-4.1-mini"

VERBS = ["Extracts", "Reviews", "Generates", "Converts", "Validates", "Summarises",
         "Formats", "Migrates", "Audits", "Benchmarks", "Drafts", "Refactors"]
OBJECTS = ["PDF forms", "spreadsheet reports", "database migrations", "release notes",
           "API changelogs", "Terraform plans", "Kubernetes manifests", "SVG diagrams",
           "accessibility findings", "customer support macros", "unit test suites",
           "invoice batches", "translation memories", "brand style sheets"]
HOW = ["following the team's conventions", "with a checklist of common mistakes",
       "keeping the original structure intact", "using the bundled scripts",
       "and reports what it could not handle", "with links to the sources it used",
       "in small reviewable steps", "without touching files outside the project"]
WHEN = ["Use when the user asks for {o} or mentions {k}.",
        "Use when working with {o}, {k}, or files named like them.",
        "Use this skill whenever {k} come up, even if the user does not name {o} directly.",
        "Use when a task involves {o}; not for {k} alone."]
KEYWORDS = ["quarterly numbers", "form fields", "schema changes", "version bumps",
            "breaking changes", "cloud resources", "deployments", "vector graphics",
            "screen readers", "ticket replies", "flaky tests", "due dates", "glossaries",
            "logos and colours"]


def description(rng: random.Random) -> str:
    """A description of 150-300 characters, as real skills have."""
    while True:
        o, k = rng.choice(OBJECTS), rng.choice(KEYWORDS)
        text = (f"{rng.choice(VERBS)} {o} {rng.choice(HOW)}, "
                f"{rng.choice(VERBS).lower()} {rng.choice(OBJECTS)} {rng.choice(HOW)}. "
                + rng.choice(WHEN).format(o=o, k=k))
        if 150 <= len(text) <= 300:
            return text


def write_skills(folder: Path, names: list[str], rng: random.Random) -> None:
    for name in names:
        skill = folder / name
        skill.mkdir(parents=True, exist_ok=True)
        body = "\n".join(f"{i}. Step {i} of the {name} procedure: check the inputs, then act." for i in range(1, 9))
        (skill / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description(rng)}\nlicense: Apache-2.0\n---\n\n# {name}\n\n{body}\n"
        )


class Fake:
    """A loopback OpenAI-compatible chat completions server that notes when
    each request arrives (time.perf_counter of this process)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                arrived = time.perf_counter()
                length = int(self.headers.get("content-length", "0"))
                self.rfile.read(length)
                if self.path.endswith("/chat/completions"):
                    with fake.lock:
                        fake.arrivals.append(arrived)
                    chunk = {"id": "c1", "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]}
                    stop = {"id": "c1", "object": "chat.completion.chunk",
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                    body = (f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(stop)}\n\ndata: [DONE]\n\n").encode()
                    self.answer(200, "text/event-stream", body)
                else:
                    self.answer(404, "application/json", b'{"error": {"message": "not found"}}')

            def do_GET(self) -> None:  # noqa: N802
                self.answer(404, "application/json", b'{"error": {"message": "not found"}}')

            def answer(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def first_after(self, started: float) -> float | None:
        with self.lock:
            later = [t for t in self.arrivals if t >= started]
        return min(later) if later else None


class Acp:
    """`pincer acp` on pipes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, cwd=cwd)
        self.buf = b""

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def response(self, request_id: int) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if message.get("id") == request_id and ("result" in message or "error" in message):
                    if "error" in message:
                        raise RuntimeError(f"request {request_id} failed: {message['error']}")
                    return message["result"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no response to request {request_id} within {TIMEOUT_S} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(f"pincer closed its stdout (exit {self.proc.poll()})")
                self.buf += chunk

    def vm_hwm_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("no VmHWM in /proc status")

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Setup:
    """One count of skills: its home, config, data and workspace."""

    def __init__(self, root: Path, binary: str, count: int, fake: Fake):
        self.root, self.binary, self.count, self.fake = root, binary, count, fake
        for sub in ("home", "config/pincer", "data", "work"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.work = (root / "work").resolve()
        rng = random.Random(count)
        names = [f"skill-{i:04d}" for i in range(count)]
        write_skills(self.work / ".agents" / "skills", names[: count // 2], rng)
        write_skills(root / "home" / ".agents" / "skills", names[count // 2:], rng)
        self.budget(None)
        subprocess.run([binary, "trust", str(self.work)], env=self.env(), cwd=self.work,
                       check=True, stdout=subprocess.DEVNULL)

    def budget(self, tokens: int | None) -> None:
        text = "" if tokens is None else f"[skills]\ncatalogue_tokens = {tokens}\n"
        (self.root / "config/pincer/config.toml").write_text(text)

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root / "home"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "PINCER_DATA_DIR": str(self.root / "data"),
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": self.fake.url,
            "LANG": "C.UTF-8",
        }

    def once(self, model: str) -> dict:
        """One process: initialize, session/new and a prompt, timed."""
        started = time.perf_counter()
        acp = Acp([self.binary, "acp", "--provider", "openai", "--model", model], self.env(),
                  self.work, self.root / "stderr.log")
        try:
            acp.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": 1, "clientCapabilities": {}}})
            acp.response(1)
            initialized = time.perf_counter()
            acp.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                      "params": {"cwd": str(self.work), "mcpServers": []}})
            session = acp.response(2)["sessionId"]
            acp.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                      "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}})
            result = acp.response(3)
            if result.get("stopReason") != "end_turn":
                raise RuntimeError(f"the prompt ended with {result}")
            first = self.fake.first_after(started)
            if first is None:
                raise RuntimeError("no model request arrived")
            return {"initialize_ms": (initialized - started) * 1000,
                    "first_request_ms": (first - started) * 1000,
                    "vm_hwm_mib": acp.vm_hwm_kib() / 1024, "session": session}
        finally:
            acp.close()

    def listing_ms(self) -> float:
        """`pincer skills list --json`: a process that discovers and prints
        the skills (each `SKILL.md` read and parsed), nothing more."""
        started = time.perf_counter()
        out = subprocess.run([self.binary, "skills", "list", "--json"], env=self.env(), cwd=self.work,
                             check=True, capture_output=True)
        elapsed = (time.perf_counter() - started) * 1000
        listed = len(json.loads(out.stdout)["skills"])
        if listed != self.count:
            raise RuntimeError(f"`pincer skills list` lists {listed} skills, not {self.count}")
        return elapsed

    def context(self, session: str) -> dict:
        out = subprocess.run([self.binary, "context", "show", "--session", session, "--json"],
                             env=self.env(), cwd=self.work, check=True, capture_output=True)
        return json.loads(out.stdout)

    def catalogue(self, tokens: int | None) -> dict:
        self.budget(tokens)
        try:
            view = self.context(self.once(COUNTED_MODEL)["session"])
        finally:
            self.budget(None)
        return {"system_tokens": view["system_tokens"], "tool_tokens": view["tool_tokens"], "skills": view["skills"],
                "shortened": len(view["skills_shortened"]), "counted_by": view["counted_by"]}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="target/release/pincer", help="the pincer binary")
    parser.add_argument("-n", type=int, default=15, help="rounds: measured processes per count")
    parser.add_argument("--counts", default="0,100,1000", help="skill counts, comma separated")
    parser.add_argument("--json", help="write the raw figures here")
    args = parser.parse_args()
    binary = Path(args.bin)
    if not binary.is_file():
        say(f"no pincer binary at {binary}; run `cargo build --release --locked`")
        return 2
    binary = str(binary.resolve())
    counts = [int(c) for c in args.counts.split(",")]
    if 0 not in counts:
        counts.insert(0, 0)
    fake = Fake()
    scratch = Path(tempfile.mkdtemp(prefix="pincer-skills-"))
    results: dict[int, dict] = {}
    load_before = load()
    try:
        setups = {}
        for count in counts:
            say(f"{count} skills: writing them")
            setups[count] = Setup(scratch / f"s{count}", binary, count, fake)
            setups[count].once(TIMED_MODEL)  # warm-up: the data directory, the page cache
        runs: dict[int, list[dict]] = {count: [] for count in counts}
        listings: dict[int, list[float]] = {count: [] for count in counts}
        # Round by round, every count in each, so a busy spell of the
        # machine falls on all of them alike.
        for i in range(args.n):
            for count, setup in setups.items():
                runs[count].append(setup.once(TIMED_MODEL))
                listings[count].append(setup.listing_ms())
                say(f"  round {i + 1}, {count} skills: {runs[count][-1]}, skills list {listings[count][-1]:.1f} ms")
        for count, setup in setups.items():
            default = setup.catalogue(None)
            whole = setup.catalogue(100_000) if count else default
            results[count] = {
                "initialize_ms": [r["initialize_ms"] for r in runs[count]],
                "first_request_ms": [r["first_request_ms"] for r in runs[count]],
                "vm_hwm_mib": [r["vm_hwm_mib"] for r in runs[count]],
                "skills_list_ms": listings[count],
                "default": default, "whole": whole,
            }
            say(f"  {count} skills, catalogue: {default}, every skill in full: {whole}")
    finally:
        load_after = load()
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"load": [load_before, load_after], "results": results}, indent=2))

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"

    base = results[0]["default"]["system_tokens"]
    base_tools = results[0]["default"]["tool_tokens"]
    out = [f"load average {load_before} before, {load_after} after; n = {args.n} per count; "
           f"catalogue counted by `{results[0]['default']['counted_by']}` ({COUNTED_MODEL})", "",
           "| skills | spawn → `initialize`, ms | spawn → first model request, ms | VmHWM, MiB "
           "| `pincer skills list`, ms "
           "| catalogue tokens (default budget) | in full / by name only "
           "| every skill in full: catalogue tokens | tokens per skill | `skill` tool's schema, tokens |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for count, r in results.items():
        d, w = r["default"], r["whole"]
        added = d["system_tokens"] - base
        full = d["skills"] - d["shortened"]
        whole_added = w["system_tokens"] - base
        whole_per = f"{(w['system_tokens'] - base) / w['skills']:.1f}" if w["skills"] else "—"
        if w["shortened"]:
            whole_per += f" ({w['shortened']} by name only)"
        out.append(f"| {count:,} | {med(r['initialize_ms'])} | {med(r['first_request_ms'])} "
                   f"| {med(r['vm_hwm_mib'])} | {med(r['skills_list_ms'])} | {added:,} | {full:,} / {d['shortened']:,} | {whole_added:,} | {whole_per} "
                   f"| {d['tool_tokens'] - base_tools:,} |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
