"""Launches every agent in editors/zed/settings.json as Zed would and completes
a prompt over ACP against the built binary.

    PINCER_BIN=target/debug/pincer python3 editors/zed/test/test_settings.py

Zed starts a custom agent with `command` and `args` as written, `env` added to
its own environment. The test substitutes the built binary for a bare
`pincer` command and points Pincer at a scripted provider through
PINCER_CONFIG and a fresh PINCER_DATA_DIR, so the snippet's args stay as
written. Python 3 standard library only.
"""

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = ROOT / "editors" / "zed" / "settings.json"
REPLY = "Hello from Pincer"
MODES = {"read_only", "supervised", "full"}
# The fields of a custom agent in Zed's settings (CustomAgentServerSettings::Custom).
CUSTOM_FIELDS = {
    "type", "command", "args", "env", "default_mode", "default_model", "favorite_models",
    "default_config_options", "favorite_config_option_values",
}


def strip_jsonc(text):
    """JSON with comments and trailing commas (Zed's settings format) to JSON.

    Comments and commas inside strings are kept: the scanner tracks strings
    and their escapes.
    """
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError(f"unterminated /* comment at offset {i}")
            i = end + 2
        else:
            out.append(c)
            i += 1
    # With the comments gone, a trailing comma stands right before } or ].
    return drop_trailing_commas("".join(out))


def drop_trailing_commas(text):
    """Remove commas that stand before a closing } or ] (outside strings)."""
    out = []
    in_string = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                i += 1
                continue
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_settings(path=SETTINGS):
    return json.loads(strip_jsonc(path.read_text(encoding="utf-8")))


class Agent:
    """A process speaking newline-delimited JSON-RPC on stdin/stdout."""

    def __init__(self, argv, env, cwd):
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, text=True, encoding="utf-8",
        )
        self.lines = queue.Queue()
        self.received = []
        self.stderr = []
        self.next_id = 1
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink.put(line)
        sink.put(None)

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def describe(self):
        parts = ["command: " + " ".join(self.argv)]
        parts += ["stderr: " + line for line in self.stderr]
        parts += ["received: " + json.dumps(m) for m in self.received]
        return "\n".join(parts)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params, timeout=30.0):
        """Send a request; return (result, session/update params seen before it)."""
        request_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        updates = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"{method}: no response in {timeout}s\n{self.describe()}") from None
            if line is None:
                raise AssertionError(f"{method}: the agent closed stdout\n{self.describe()}")
            message = json.loads(line)
            self.received.append(message)
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"],
                           "error": {"code": -32601, "message": "not supported by the test client"}})
            elif message.get("method") == "session/update":
                updates.append(message["params"])
            elif message.get("id") == request_id:
                if "error" in message:
                    raise AssertionError(f"{method}: error {message['error']}\n{self.describe()}")
                return message["result"], updates

    def close(self):
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def config_value(session, option_id):
    for option in session.get("configOptions", []):
        if option.get("id") == option_id:
            return option.get("currentValue")
    return None


class ZedSettingsTest(unittest.TestCase):
    bin = None

    @classmethod
    def setUpClass(cls):
        value = os.environ.get("PINCER_BIN", "")
        if not value:
            raise RuntimeError("PINCER_BIN is not set: point it at the built pincer binary")
        path = Path(value).resolve()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RuntimeError(f"PINCER_BIN={path} is not an executable file: build it first (cargo build)")
        cls.bin = str(path)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pincer-zed-")
        self.addCleanup(self.tmp.cleanup)
        tmp = Path(self.tmp.name)
        (tmp / "script.jsonl").write_text(json.dumps([{"text": REPLY}]) + "\n", encoding="utf-8")
        self.config = tmp / "config.toml"
        self.config.write_text(
            'provider = "demo"\n[providers.demo]\nkind = "scripted"\nscript = "script.jsonl"\n',
            encoding="utf-8",
        )
        self.workspace = tmp / "workspace"
        self.workspace.mkdir()
        self.home = tmp / "home"
        self.home.mkdir()
        self.data_dirs = tmp

    def agents(self):
        servers = load_settings().get("agent_servers")
        self.assertIsInstance(servers, dict, "settings.json has no agent_servers object")
        self.assertTrue(servers, "agent_servers is empty")
        return servers

    def test_jsonc_stripping_keeps_strings_and_drops_comments(self):
        text = '{\n  // c1\n  "a": "http://x // not a comment", /* c2 */\n  "b": ["/*", "\\"q\\"",],\n}\n'
        self.assertEqual(json.loads(strip_jsonc(text)), {"a": "http://x // not a comment", "b": ["/*", '"q"']})

    def test_entries_have_the_custom_agent_shape(self):
        for name, entry in self.agents().items():
            with self.subTest(agent=name):
                self.assertEqual(entry.get("type"), "custom", f"{name}: custom agents need \"type\": \"custom\"")
                unknown = set(entry) - CUSTOM_FIELDS
                self.assertFalse(unknown, f"{name}: fields Zed does not know: {sorted(unknown)}")
                self.assertIsInstance(entry.get("command"), str)
                self.assertTrue(entry["command"])
                args = entry.get("args", [])
                self.assertTrue(isinstance(args, list) and all(isinstance(a, str) for a in args), f"{name}: args")
                self.assertEqual(args[:1], ["acp"], f"{name}: Pincer serves ACP with `pincer acp`")
                env = entry.get("env", {})
                self.assertTrue(isinstance(env, dict) and all(isinstance(v, str) for v in env.values()),
                                f"{name}: env must map names to strings")
                if "default_mode" in entry:
                    self.assertIn(entry["default_mode"], MODES, f"{name}: default_mode is not a Pincer mode")

    def test_every_agent_launches_and_completes_a_prompt(self):
        for index, (name, entry) in enumerate(self.agents().items()):
            with self.subTest(agent=name):
                self.run_agent(name, entry, self.data_dirs / f"data-{index}")

    def run_agent(self, name, entry, data_dir):
        command = self.bin if entry["command"] == "pincer" else entry["command"]
        argv = [command, *entry.get("args", [])]
        env = dict(os.environ)
        for key in ("PINCER_PROVIDER", "PINCER_MODEL", "PINCER_MODE", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            env.pop(key, None)
        env.update(HOME=str(self.home), PINCER_CONFIG=str(self.config), PINCER_DATA_DIR=str(data_dir))
        env.update(entry.get("env", {}))
        agent = Agent(argv, env, str(self.workspace))
        try:
            # What Zed sends: protocol 1, file system and terminal capabilities.
            init, _ = agent.request("initialize", {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
            })
            self.assertEqual(init.get("protocolVersion"), 1)
            # Offered for the Registry and for a machine with no provider;
            # Zed asks to authenticate only when a request answers -32000,
            # which a working provider never does.
            self.assertEqual(
                [m["id"] for m in init.get("authMethods", [])], ["pincer-provider"],
                "one agent method, no terminal method for a client that runs no terminal logins",
            )
            session, _ = agent.request("session/new", {"cwd": str(self.workspace), "mcpServers": []})
            session_id = session["sessionId"]
            available = {m["id"] for m in session["modes"]["availableModes"]}
            self.assertEqual(available, MODES)
            args = entry.get("args", [])
            if "--mode" in args:
                expected = args[args.index("--mode") + 1]
                self.assertEqual(session["modes"]["currentModeId"], expected, f"{name}: --mode did not apply")
                self.assertEqual(config_value(session, "mode"), expected)
            if "default_mode" in entry:
                # Zed sets the default mode on a new thread.
                agent.request("session/set_mode", {"sessionId": session_id, "modeId": entry["default_mode"]})
            result, updates = agent.request("session/prompt", {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": "Say hello"}],
            })
            text = "".join(
                u["update"]["content"]["text"]
                for u in updates
                if u["sessionId"] == session_id
                and u["update"].get("sessionUpdate") == "agent_message_chunk"
                and u["update"]["content"].get("type") == "text"
            )
            self.assertEqual(text, REPLY, f"{name}: streamed reply\n{agent.describe()}")
            self.assertEqual(result, {"stopReason": "end_turn"})
        finally:
            code = agent.close()
        self.assertEqual(code, 0, f"{name}: exit code after stdin closed\n{agent.describe()}")


def main():
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ZedSettingsTest)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 0 if result.wasSuccessful() and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
