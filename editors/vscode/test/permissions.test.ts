import { test } from "node:test";
import assert from "node:assert/strict";
import type { RequestPermissionRequest } from "@agentclientprotocol/sdk";
import { orderedOptions, outcomeFor, PermissionBroker } from "../src/permissions.js";

const request = (sessionId = "s1"): RequestPermissionRequest => ({
  sessionId,
  toolCall: { toolCallId: "c1", title: "Edit a" },
  options: [
    { optionId: "reject_once", name: "Reject", kind: "reject_once" },
    { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
  ],
});

function recordingBroker() {
  const asked: string[] = [];
  const settled: [string, string][] = [];
  const broker = new PermissionBroker({
    asked: (p) => asked.push(p.id),
    settled: (id, outcome) => settled.push([id, outcome]),
  });
  return { broker, asked, settled };
}

test("outcomeFor selects an offered option and refuses others", () => {
  assert.deepEqual(outcomeFor(request(), "allow_once"), { outcome: { outcome: "selected", optionId: "allow_once" } });
  assert.deepEqual(outcomeFor(request(), undefined), { outcome: { outcome: "cancelled" } });
  assert.throws(() => outcomeFor(request(), "allow_always"), /option `allow_always` was not offered \(offered: reject_once, allow_once\)/);
});

test("allow options come first", () => {
  assert.deepEqual(
    orderedOptions(request().options).map((o) => o.optionId),
    ["allow_once", "reject_once"],
  );
});

test("the first answer wins", async () => {
  const { broker, asked, settled } = recordingBroker();
  const answer = broker.ask(request());
  assert.deepEqual(asked, ["perm-1"]);
  assert.equal(broker.answer("perm-1", "reject_once"), true);
  assert.equal(broker.answer("perm-1", "allow_once"), false);
  assert.deepEqual(await answer, { outcome: { outcome: "selected", optionId: "reject_once" } });
  assert.deepEqual(settled, [["perm-1", "reject_once"]]);
  assert.deepEqual(broker.openIds(), []);
});

test("an option that was not offered leaves the question open", () => {
  const { broker } = recordingBroker();
  void broker.ask(request());
  assert.throws(() => broker.answer("perm-1", "bogus"), /not offered/);
  assert.equal(broker.isOpen("perm-1"), true);
});

test("cancelAll dismisses only that session's questions", async () => {
  const { broker } = recordingBroker();
  const a = broker.ask(request("s1"));
  const b = broker.ask(request("s2"));
  broker.cancelAll("s1");
  assert.deepEqual(await a, { outcome: { outcome: "cancelled" } });
  assert.deepEqual(broker.openIds(), ["perm-2"]);
  broker.answer("perm-2", "allow_once");
  assert.deepEqual(await b, { outcome: { outcome: "selected", optionId: "allow_once" } });
});

test("an aborted signal (the agent withdrew) dismisses the question", async () => {
  const { broker, settled } = recordingBroker();
  const abort = new AbortController();
  const answer = broker.ask(request(), abort.signal);
  abort.abort();
  assert.deepEqual(await answer, { outcome: { outcome: "cancelled" } });
  assert.deepEqual(settled, [["perm-1", "cancelled"]]);
});
