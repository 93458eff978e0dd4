"""Launches every agent in editors/jetbrains/acp.json as a JetBrains IDE would
and completes a prompt over ACP against the built binary.

    PINCER_BIN=target/debug/pincer python3 editors/jetbrains/test/test_acp_json.py

JetBrains AI Assistant reads custom agents from ~/.jetbrains/acp.json:
`agent_servers`, each entry's name shown in the AI Chat, its `command` started
with `args` and `env` set for the process. The file is plain JSON. The ACP
client and the launch checks are the Zed test's (editors/zed/test): it sends
what Zed sends (protocol 1, file system and terminal capabilities); what a
JetBrains IDE puts in `initialize` is not documented. Python 3 standard
library only.
"""

import json
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "editors" / "zed" / "test"))

import test_settings as zed  # noqa: E402  (the path above first)

ACP_JSON = ROOT / "editors" / "jetbrains" / "acp.json"
# The fields JetBrains documents for an entry of acp.json.
FIELDS = {"command", "args", "env"}


class JetBrainsAcpJsonTest(zed.ZedSettingsTest):
    def agents(self):
        servers = json.loads(ACP_JSON.read_text(encoding="utf-8")).get("agent_servers")
        self.assertIsInstance(servers, dict, "acp.json has no agent_servers object")
        self.assertTrue(servers, "agent_servers is empty")
        return servers

    def test_jsonc_stripping_keeps_strings_and_drops_comments(self):
        self.skipTest("acp.json is plain JSON")

    def test_entries_have_the_custom_agent_shape(self):
        for name, entry in self.agents().items():
            with self.subTest(agent=name):
                unknown = set(entry) - FIELDS
                self.assertFalse(unknown, f"{name}: fields JetBrains does not document: {sorted(unknown)}")
                self.assertIsInstance(entry.get("command"), str)
                self.assertTrue(entry["command"])
                args = entry.get("args", [])
                self.assertTrue(isinstance(args, list) and all(isinstance(a, str) for a in args), f"{name}: args")
                self.assertEqual(args[:1], ["acp"], f"{name}: Pincer serves ACP with `pincer acp`")
                env = entry.get("env", {})
                self.assertTrue(isinstance(env, dict) and all(isinstance(v, str) for v in env.values()),
                                f"{name}: env must map names to strings")


def main():
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(JetBrainsAcpJsonTest)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed - len(result.skipped)} passed, {failed} failed")
    return 0 if result.wasSuccessful() and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
