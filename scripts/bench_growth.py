#!/usr/bin/env python3
"""What a turn costs as a session grows, and what live chat sessions hold.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`; give --bin more than once to measure
several builds (before and after a change) in one run, one after the other.

Two modes:

  acp    one `pincer acp` (scripted model, `--script`) answers TURNS prompts in
         one session. The config file sets `context_window` small enough that
         automatic compaction happens several times (at `compact_at` 0.8 of
         the window, the default). Reported per window of turns (500 by
         default): the median and 90th percentile of the wall time from
         `session/prompt` to its response, the process's CPU time per turn
         (utime + stime from /proc/PID/stat over the window: independent of
         the machine's load), VmRSS at the end of the window, and the
         compactions so far. Then VmRSS and VmHWM at 1k, 5k and 10k turns.

  serve  one `pincer serve --channel webhook` (scripted model) with a loopback
         peer standing in for the chat system: the peer POSTs signed messages
         (`docs/channels.md`) and counts the replies Pincer POSTs back.
         SESSIONS chats each send a first message (a new live session each),
         CONCURRENCY in flight at a time; VmRSS is read as sessions are added.
         Then ROUNDS rounds prompt every chat once more; per round: the
         median wall time from the POST to the reply, CPU time per prompt,
         VmRSS. The webhook channel because it is the chat channel a
         loopback peer can speak exactly (Telegram would need a fake Bot
         API); `live_drafts = false` so each reply is one POST, and
         `coalesce_ms = 0` so a message is a prompt at once.

    python3 scripts/bench_growth.py acp --bin target/release/pincer --turns 10000
    python3 scripts/bench_growth.py serve --bin target/release/pincer --sessions 1000 --rounds 10
    python3 scripts/bench_growth.py acp --bin /tmp/before/pincer --bin target/release/pincer

Prints a Markdown report on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.server
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
SECRET = "bench-growth-secret-0123456789"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def status_kib(pid: int) -> dict[str, int]:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                fields[key] = int(value.split()[0])
    return fields


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # Fields after the command name (which may hold spaces) in parentheses.
    rest = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(rest[11]), int(rest[12])
    return (utime + stime) / CLK_TCK


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def revision(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        out = ""
    return out or "?"


def environment(root: Path) -> dict[str, str]:
    for sub in ("home", "config/pincer", "xdg-data", "data", "ws"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "xdg-data"),
        "PINCER_DATA_DIR": str(root / "data"),
        "PINCER_WEBHOOK_SECRET": SECRET,
        "LANG": "C.UTF-8",
        "RUST_LOG": "pincer=info",
    }


def write_script(path: Path, lines: int) -> None:
    """`lines` model turns, each a short answer in three chunks."""
    with open(path, "w") as f:
        for n in range(lines):
            f.write(
                json.dumps(
                    [
                        {"text": f"Answer {n}: the parser change is done, "},
                        {"text": "the tests pass and the next step is "},
                        {"text": "the error messages."},
                    ]
                )
                + "\n"
            )


# --------------------------------------------------------------------------- #
# acp
# --------------------------------------------------------------------------- #


class Acp:
    """`pincer acp` on pipes; responses handed over by a reader thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        self.stderr = open(log, "wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=cwd,
        )
        self.responses: queue.Queue[dict] = queue.Queue()
        self.compactions = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.next_id = 0

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.startswith(b"{"):
                continue  # a profiler's own words (heaptrack prints on stdout)
            message = json.loads(line)
            if "method" in message:
                update = message.get("params", {}).get("update", {})
                kind = update.get("sessionUpdate")
                if kind == "agent_message_chunk" and "compacted into a summary" in json.dumps(update):
                    self.compactions += 1
                if "id" in message:
                    # A request of the agent's: this client offers nothing.
                    self.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
                continue
            self.responses.put(message)

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict, timeout: float = 120.0) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        message = self.responses.get(timeout=timeout)
        if message.get("id") != self.next_id:
            raise RuntimeError(f"answer to {message.get('id')}, expected {self.next_id}")
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def bench_acp(binary: str, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="pincer-growth-") as tmp:
        root = Path(tmp)
        env = environment(root)
        (root / "config/pincer/config.toml").write_text(
            f"context_window = {args.window}\n"
        )
        script = root / "script.jsonl"
        write_script(script, args.turns + args.turns // 100 + 10)
        acp = Acp(
            [os.path.abspath(binary), "acp", "--script", str(script)],
            env,
            root / "ws",
            root / "stderr.log",
        )
        try:
            acp.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            session = acp.call("session/new", {"cwd": str(root / "ws"), "mcpServers": []})["sessionId"]
            pid = acp.proc.pid
            windows = []
            marks = {}
            times: list[float] = []
            cpu_start = cpu_seconds(pid)
            for turn in range(1, args.turns + 1):
                prompt = f"Prompt {turn}: please go on with the parser work and tell me where it stands."
                t0 = time.perf_counter()
                result = acp.call(
                    "session/prompt",
                    {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]},
                )
                times.append((time.perf_counter() - t0) * 1000.0)
                if result.get("stopReason") != "end_turn":
                    raise RuntimeError(f"turn {turn} ended with {result}")
                if turn % args.every == 0:
                    cpu_now = cpu_seconds(pid)
                    status = status_kib(pid)
                    windows.append(
                        {
                            "turns": turn,
                            "median_ms": statistics.median(times),
                            "p90_ms": percentile(times, 90),
                            "cpu_ms_per_turn": (cpu_now - cpu_start) * 1000.0 / len(times),
                            "rss_kib": status["VmRSS"],
                            "hwm_kib": status["VmHWM"],
                            "compactions": acp.compactions,
                        }
                    )
                    say(f"  {turn:6d} turns: {windows[-1]}")
                    times = []
                    cpu_start = cpu_now
                if turn in (1000, 5000, 10000) or turn == args.turns:
                    marks[turn] = status_kib(pid)
            db = root / "data" / "pincer.db"
            size = db.stat().st_size if db.exists() else 0
        finally:
            acp.close()
        return {"binary": binary, "version": revision(binary), "windows": windows, "marks": marks, "db_bytes": size}


def report_acp(results: list[dict], args) -> None:
    print(f"`bench_growth.py acp --turns {args.turns} --window {args.window} --every {args.every}`\n")
    for result in results:
        print(f"**{result['binary']}** ({result['version']}); database at the end {result['db_bytes'] / 1e6:.1f} MB\n")
        print("| turns | median ms/turn | p90 ms | CPU ms/turn | VmRSS MiB | compactions so far |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for w in result["windows"]:
            print(
                f"| {w['turns']} | {w['median_ms']:.2f} | {w['p90_ms']:.2f} | {w['cpu_ms_per_turn']:.2f} "
                f"| {mib(w['rss_kib'])} | {w['compactions']} |"
            )
        print()
        print("| after turn | VmRSS MiB | VmHWM MiB | RssAnon MiB | RssFile MiB | threads |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for turn, status in sorted(result["marks"].items()):
            print(
                f"| {turn} | {mib(status['VmRSS'])} | {mib(status['VmHWM'])} | {mib(status['RssAnon'])} "
                f"| {mib(status['RssFile'])} | {status['Threads']} |"
            )
        print()


# --------------------------------------------------------------------------- #
# serve
# --------------------------------------------------------------------------- #


def sign(timestamp: int, body: bytes) -> str:
    digest = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class Peer:
    """The chat system's side: receives Pincer's replies, one event per chat."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: dict[str, threading.Event] = {}
        self.replies = 0
        peer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                answer = json.dumps({"message_id": body.get("id", "")}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                if body.get("text") and not body.get("edit_of"):
                    with peer.lock:
                        peer.replies += 1
                        event = peer.waiting.get(body.get("chat", ""))
                    if event is not None:
                        event.set()

            def log_message(self, *_args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def expect(self, chat: str) -> threading.Event:
        event = threading.Event()
        with self.lock:
            self.waiting[chat] = event
        return event

    def close(self) -> None:
        self.server.shutdown()


def deliver(listen: str, chat: str, text: str, delivery: str) -> None:
    body = json.dumps(
        {
            "message": {
                "chat": chat,
                "chat_kind": "direct",
                "thread": None,
                "sender": {"id": "u1", "name": "Ada", "is_bot": False},
                "text": text,
                "origin": {"source": "user"},
            }
        }
    ).encode()
    timestamp = int(time.time())
    request = urllib.request.Request(
        listen,
        data=body,
        method="POST",
        headers={
            "content-type": "application/json",
            "x-pincer-timestamp": str(timestamp),
            "x-pincer-signature": sign(timestamp, body),
            "x-pincer-delivery": delivery,
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    if answer.get("status") != "accepted":
        raise RuntimeError(f"message to {chat} answered {answer}")


def prompt_all(listen: str, peer: Peer, chats: list[str], round_no: int, concurrency: int) -> list[float]:
    """Each chat sends one message and waits for its reply; `concurrency`
    chats at a time. The wall times in milliseconds."""
    todo: queue.Queue[str] = queue.Queue()
    for chat in chats:
        todo.put(chat)
    times: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                chat = todo.get_nowait()
            except queue.Empty:
                return
            event = peer.expect(chat)
            t0 = time.perf_counter()
            try:
                deliver(listen, chat, f"Message {round_no} from {chat}: how is the work going?", f"{chat}-{round_no}")
            except Exception as err:  # noqa: BLE001 (reported below)
                with lock:
                    failures.append(f"{chat}: {err}")
                continue
            if not event.wait(120):
                with lock:
                    failures.append(f"{chat}: no reply in 120 s")
                continue
            with lock:
                times.append((time.perf_counter() - t0) * 1000.0)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} failed, first: {failures[0]}")
    return times


def bench_serve(binary: str, args) -> dict:
    peer = Peer()
    with tempfile.TemporaryDirectory(prefix="pincer-growth-serve-") as tmp:
        root = Path(tmp)
        env = environment(root)
        (root / "config/pincer/config.toml").write_text(
            "[channels.webhook]\n"
            f'callback_url = "{peer.url}"\n'
            'listen = "127.0.0.1:0"\n'
            'allow = ["u1"]\n'
            f'workspace = "{root / "ws"}"\n'
            "coalesce_ms = 0\n"
            "live_drafts = false\n"
        )
        script = root / "script.jsonl"
        write_script(script, args.rounds + 5)
        log = root / "stderr.log"
        with open(log, "wb") as stderr:
            proc = subprocess.Popen(
                [os.path.abspath(binary), "serve", "--channel", "webhook", "--script", str(script)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                cwd=root / "ws",
            )
        try:
            deadline = time.time() + 30
            listen = None
            while listen is None:
                text = log.read_text(errors="replace")
                for line in text.splitlines():
                    if "webhook listening" in line and "addr=" in line:
                        listen = "http://" + line.split("addr=")[1].split()[0] + "/"
                if listen is None:
                    if time.time() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"no webhook listener: {text[-2000:]}")
                    time.sleep(0.05)
            pid = proc.pid
            chats = [f"room-{i}" for i in range(args.sessions)]
            added = []
            start = status_kib(pid)
            say(f"  started: {start}")
            step = max(1, args.sessions // 10)
            for first in range(0, args.sessions, step):
                group = chats[first : first + step]
                cpu0 = cpu_seconds(pid)
                times = prompt_all(listen, peer, group, 0, args.concurrency)
                cpu = (cpu_seconds(pid) - cpu0) * 1000.0 / len(group)
                status = status_kib(pid)
                added.append(
                    {
                        "sessions": first + len(group),
                        "median_ms": statistics.median(times),
                        "cpu_ms_per_prompt": cpu,
                        "rss_kib": status["VmRSS"],
                        "threads": status["Threads"],
                    }
                )
                say(f"  {added[-1]}")
            rounds = []
            for round_no in range(1, args.rounds + 1):
                cpu0 = cpu_seconds(pid)
                times = prompt_all(listen, peer, chats, round_no, args.concurrency)
                cpu = (cpu_seconds(pid) - cpu0) * 1000.0 / len(chats)
                status = status_kib(pid)
                rounds.append(
                    {
                        "round": round_no,
                        "turns_per_session": round_no + 1,
                        "median_ms": statistics.median(times),
                        "p90_ms": percentile(times, 90),
                        "cpu_ms_per_prompt": cpu,
                        "rss_kib": status["VmRSS"],
                        "hwm_kib": status["VmHWM"],
                    }
                )
                say(f"  round {rounds[-1]}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            peer.close()
        return {"binary": binary, "version": revision(binary), "start": start, "added": added, "rounds": rounds}


def report_serve(results: list[dict], args) -> None:
    print(
        f"`bench_growth.py serve --sessions {args.sessions} --rounds {args.rounds} "
        f"--concurrency {args.concurrency}`\n"
    )
    for result in results:
        print(f"**{result['binary']}** ({result['version']}); VmRSS at start {mib(result['start']['VmRSS'])} MiB\n")
        print("| live sessions | median ms to reply | CPU ms/prompt | VmRSS MiB | threads |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for a in result["added"]:
            print(
                f"| {a['sessions']} | {a['median_ms']:.1f} | {a['cpu_ms_per_prompt']:.2f} "
                f"| {mib(a['rss_kib'])} | {a['threads']} |"
            )
        print()
        print("| round (every session prompted) | turns per session | median ms | p90 ms | CPU ms/prompt | VmRSS MiB | VmHWM MiB |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in result["rounds"]:
            print(
                f"| {r['round']} | {r['turns_per_session']} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} "
                f"| {r['cpu_ms_per_prompt']:.2f} | {mib(r['rss_kib'])} | {mib(r['hwm_kib'])} |"
            )
        print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    acp = sub.add_parser("acp", help="one session, many prompts")
    acp.add_argument("--bin", action="append", required=True)
    acp.add_argument("--turns", type=int, default=10000)
    acp.add_argument("--window", type=int, default=80000, help="context_window in the config file")
    acp.add_argument("--every", type=int, default=500, help="turns per reported window")
    serve = sub.add_parser("serve", help="many live chat sessions")
    serve.add_argument("--bin", action="append", required=True)
    serve.add_argument("--sessions", type=int, default=1000)
    serve.add_argument("--rounds", type=int, default=10)
    serve.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    say(f"load: {os.getloadavg()}")
    results = []
    for binary in args.bin:
        say(f"{args.mode}: {binary}")
        results.append(bench_acp(binary, args) if args.mode == "acp" else bench_serve(binary, args))
    say(f"load: {os.getloadavg()}")
    (report_acp if args.mode == "acp" else report_serve)(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
