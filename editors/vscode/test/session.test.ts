import { test } from "node:test";
import assert from "node:assert/strict";
import { diffsOf, Transcript } from "../src/session.js";

const text = (t: string) => ({ type: "text" as const, text: t });

test("message chunks stream into one item until the kind changes", () => {
  const t = new Transcript();
  assert.deepEqual(t.apply({ sessionUpdate: "agent_thought_chunk", content: text("hmm ") }), [0]);
  assert.deepEqual(t.apply({ sessionUpdate: "agent_message_chunk", content: text("Hel") }), [1]);
  assert.deepEqual(t.apply({ sessionUpdate: "agent_message_chunk", content: text("lo") }), [1]);
  assert.deepEqual(t.items, [
    { kind: "thought", text: "hmm ", messageId: undefined },
    { kind: "agent", text: "Hello", messageId: undefined },
  ]);
  assert.equal(t.lastAgentText(), "Hello");
});

test("a new messageId starts a new message", () => {
  const t = new Transcript();
  t.apply({ sessionUpdate: "agent_message_chunk", content: text("a"), messageId: "m1" });
  t.apply({ sessionUpdate: "agent_message_chunk", content: text("b"), messageId: "m1" });
  t.apply({ sessionUpdate: "agent_message_chunk", content: text("c"), messageId: "m2" });
  assert.deepEqual(
    t.items.map((i) => (i.kind === "agent" ? i.text : i.kind)),
    ["ab", "c"],
  );
});

test("tool call updates apply in place and keep diffs", () => {
  const t = new Transcript();
  t.apply({ sessionUpdate: "tool_call", toolCallId: "c1", title: "write_file", kind: "edit", rawInput: { path: "a" } });
  t.apply({ sessionUpdate: "agent_message_chunk", content: text("meanwhile") });
  const changed = t.apply({
    sessionUpdate: "tool_call_update",
    toolCallId: "c1",
    title: "Edit a",
    locations: [{ path: "/w/a" }],
    content: [{ type: "diff", path: "/w/a", oldText: "x", newText: "y" }],
  });
  assert.deepEqual(changed, [0]);
  t.apply({ sessionUpdate: "tool_call_update", toolCallId: "c1", status: "completed" });
  const tool = t.toolAt("c1");
  assert.equal(tool?.title, "Edit a");
  assert.equal(tool?.status, "completed");
  assert.equal(tool?.toolKind, "edit");
  assert.deepEqual(tool?.locations, ["/w/a"]);
  assert.deepEqual(diffsOf(tool?.content ?? []), [{ path: "/w/a", oldText: "x", newText: "y" }]);
});

test("an update for an unseen tool call creates it; a new file's diff has no old text", () => {
  const t = new Transcript();
  t.apply({
    sessionUpdate: "tool_call_update",
    toolCallId: "c9",
    status: "in_progress",
    content: [{ type: "diff", path: "/w/new", newText: "n" }],
  });
  assert.equal(t.items.length, 1);
  assert.equal(t.toolAt("c9")?.status, "in_progress");
  assert.deepEqual(diffsOf(t.toolAt("c9")?.content ?? []), [{ path: "/w/new", oldText: null, newText: "n" }]);
});

test("a plan update replaces the plan of the turn; a new turn gets a new plan", () => {
  const t = new Transcript();
  t.apply({ sessionUpdate: "plan", entries: [{ content: "a", priority: "low", status: "pending" }] });
  t.apply({ sessionUpdate: "plan", entries: [{ content: "a", priority: "low", status: "completed" }] });
  assert.equal(t.items.length, 1);
  t.addUserMessage("next");
  t.apply({ sessionUpdate: "plan", entries: [{ content: "b", priority: "low", status: "pending" }] });
  assert.deepEqual(
    t.items.map((i) => i.kind),
    ["plan", "user", "plan"],
  );
});

test("usage, mode, title and commands are state, not items", () => {
  const t = new Transcript();
  t.apply({ sessionUpdate: "usage_update", used: 10, size: 100, cost: { amount: 0.5, currency: "USD" } });
  t.apply({ sessionUpdate: "current_mode_update", currentModeId: "full" });
  t.apply({ sessionUpdate: "session_info_update", title: "Fix it" });
  t.apply({ sessionUpdate: "available_commands_update", availableCommands: [{ name: "test", description: "run tests" }] });
  assert.equal(t.items.length, 0);
  assert.deepEqual(t.usage, { used: 10, size: 100, cost: { amount: 0.5, currency: "USD" } });
  assert.equal(t.currentModeId, "full");
  assert.equal(t.title, "Fix it");
  assert.equal(t.availableCommands[0].name, "test");
});

test("permission questions are items resolved by id", () => {
  const t = new Transcript();
  t.apply({ sessionUpdate: "tool_call", toolCallId: "c1", title: "Edit a" });
  t.addPermission("perm-1", {
    sessionId: "s",
    toolCall: { toolCallId: "c1" },
    options: [{ optionId: "allow_once", name: "Allow", kind: "allow_once" }],
  });
  assert.deepEqual(t.resolvePermission("perm-1", "allow_once"), [1]);
  assert.deepEqual(t.resolvePermission("perm-unknown", "allow_once"), []);
  const item = t.items[1];
  assert.equal(item.kind, "permission");
  assert.equal(item.kind === "permission" && item.title, "Edit a");
  assert.equal(item.kind === "permission" && item.outcome, "allow_once");
});
