#!/usr/bin/env python3
"""The cached share of input tokens over a multi-turn run (issue 15).

    python3 scripts/bench_cache.py [--bin target/release/pincer] [--turns 10]

Starts a loopback server speaking Anthropic's Messages API (streamed) that
emulates its prompt caching: a request's prefix up to each `cache_control`
breakpoint (tools, then system, then messages, in that order) is written to
the cache; a later request whose prefix up to one of its breakpoints equals a
cached one reads that much from the cache (`cache_read_input_tokens`), and
the rest is `input_tokens`. Tokens are counted as bytes of the canonical JSON
/ 4. The model calls `read_file` on a file of the workspace TURNS - 1 times
(each result some 2 KB), then answers.

`pincer run --provider anthropic` plays one prompt through all the turns.
The script prints each turn's input, the share read from the cache, and the
whole run's share; then the same requests as a cache that honours only the
breakpoints on the tools and the system prompt would have served them
(Pincer before the conversation breakpoint), for comparison.
"""

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading


def tokens(value):
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"))) // 4


def prefixes(body, honour_messages=True):
    """(key, tokens, lookback keys) at each breakpoint, in the cache's order.

    As Anthropic does, a breakpoint in the conversation also finds a prefix
    cached at an earlier message boundary (up to 20 blocks back)."""
    out = []
    tools = body.get("tools", [])
    system = body.get("system", [])
    messages = body.get("messages", [])
    for i, tool in enumerate(tools):
        if "cache_control" in tool:
            out.append(("tools", i))
    if any("cache_control" in block for block in system):
        out.append(("system", None))
    if honour_messages:
        for i, message in enumerate(messages):
            content = message.get("content")
            if isinstance(content, list) and any("cache_control" in b for b in content):
                out.append(("messages", i))
    def key(value):
        return json.dumps(strip(value), sort_keys=True), tokens(strip(value))

    result = []
    for kind, index in out:
        if kind == "tools":
            result.append((*key({"tools": tools[: index + 1]}), []))
        elif kind == "system":
            result.append((*key({"tools": tools, "system": system}), []))
        else:
            earlier = [key({"tools": tools, "system": system, "messages": messages[: k + 1]})
                       for k in range(index - 1, max(-1, index - 20), -1)]
            result.append((*key({"tools": tools, "system": system, "messages": messages[: index + 1]}), earlier))
    return result


def strip(value):
    """The value without cache_control markers (they are not content)."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


class Cache:
    def __init__(self, honour_messages):
        self.stored = set()
        self.honour_messages = honour_messages

    def serve(self, body):
        total = tokens(strip({k: body.get(k) for k in ("tools", "system", "messages")}))
        read = 0
        marks = prefixes(body, self.honour_messages)
        for key, size, earlier in marks:
            for candidate, candidate_size in [(key, size)] + earlier:
                if candidate in self.stored:
                    read = max(read, candidate_size)
                    break
        for key, _, _ in marks:
            self.stored.add(key)
        return total, read


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="target/debug/pincer")
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()

    served = Cache(honour_messages=True)
    bodies = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length))
            bodies.append(body)
            total, read = served.serve(body)
            turn = len(bodies)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            out = sse("message_start", {"type": "message_start", "message": {
                "id": f"msg_{turn}", "type": "message", "role": "assistant", "model": body["model"],
                "content": [], "stop_reason": None,
                "usage": {"input_tokens": total - read, "cache_read_input_tokens": read,
                          "cache_creation_input_tokens": 0, "output_tokens": 1}}})
            if turn < args.turns:
                call = {"path": f"notes/part{turn}.md"}
                out += sse("content_block_start", {"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": f"toolu_{turn}", "name": "read_file", "input": {}}})
                out += sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(call)}})
                out += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
                stop = "tool_use"
            else:
                out += sse("content_block_start", {"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}})
                out += sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": "Read them all."}})
                out += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
                stop = "end_turn"
            out += sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                         "usage": {"output_tokens": 20}})
            out += sse("message_stop", {"type": "message_stop"})
            self.wfile.write(out)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    with tempfile.TemporaryDirectory() as tmp:
        ws = os.path.join(tmp, "ws")
        os.makedirs(os.path.join(ws, "notes"))
        for i in range(1, args.turns):
            with open(os.path.join(ws, "notes", f"part{i}.md"), "w") as f:
                f.write(f"# Part {i}\n\n" + ("A line of notes about the design of part %d.\n" % i) * 48)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.path.join(tmp, "home"),
            "XDG_CONFIG_HOME": os.path.join(tmp, "config"),
            "PINCER_DATA_DIR": os.path.join(tmp, "data"),
            "ANTHROPIC_API_KEY": "sk-ant-bench",
            "ANTHROPIC_BASE_URL": url,
        }
        done = subprocess.run(
            [args.bin, "run", "--provider", "anthropic", "--model", "claude-bench", "--mode", "full",
             "--cwd", ws, "Read every file under notes/, one at a time, then say you did."],
            env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            sys.exit(f"pincer run exited {done.returncode}")
    server.shutdown()

    # Replay for both policies from scratch, so each is measured the same way.
    now, old = Cache(True), Cache(False)
    sums = {"total": 0, "now": 0, "old": 0}
    print(f"{'turn':>4} {'input tokens':>13} {'cached now':>11} {'share':>6} {'cached before':>14} {'share':>6}")
    for turn, body in enumerate(bodies, 1):
        total, read_now = now.serve(body)
        _, read_old = old.serve(body)
        sums["total"] += total
        sums["now"] += read_now
        sums["old"] += read_old
        print(f"{turn:>4} {total:>13} {read_now:>11} {read_now / total:>6.1%} {read_old:>14} {read_old / total:>6.1%}")
    print(f"run: {sums['total']} input tokens over {len(bodies)} turns; "
          f"cached {sums['now'] / sums['total']:.1%} with the conversation breakpoint, "
          f"{sums['old'] / sums['total']:.1%} with tools and system only")


if __name__ == "__main__":
    main()
