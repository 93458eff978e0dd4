// The client side (agent process, controller, transcript, permissions)
// against the fake agent, spawned over stdio as Pincer would be.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { ChatController, ChatEvent } from "../src/controller.js";
import { diffsOf, type ToolItem } from "../src/session.js";
import { fakeSettings, harness } from "./helpers.js";

/** Answers every permission question with `optionId` (or calls `act`) as it is asked. */
function onPermission(controller: ChatController, act: (id: string) => void): void {
  controller.onEvent((e: ChatEvent) => {
    if (e.type === "permission") queueMicrotask(() => act(e.pending.id));
  });
}

function tools(controller: ChatController): ToolItem[] {
  return controller.transcript.items.filter((i): i is ToolItem => i.kind === "tool");
}

test("a prompt streams thought, text, plan and usage, and ends with end_turn", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  assert.equal(await h.controller.prompt("hello"), "end_turn");
  const kinds = h.controller.transcript.items.map((i) => i.kind);
  assert.deepEqual(kinds, ["user", "thought", "agent", "plan", "stop"]);
  assert.equal(h.controller.transcript.lastAgentText(), "Hello!");
  assert.deepEqual(h.controller.transcript.usage, { used: 15, size: 1000, cost: undefined });
  // The agent text reached the view chunk by chunk, not at the end.
  const streamed = h.events.flatMap((e) =>
    e.type === "items" ? e.changes.filter((c) => c.item.kind === "agent").map((c) => (c.item as { text: string }).text) : [],
  );
  assert.deepEqual(streamed, ["Hel", "Hello", "Hello!"]);
  // Busy while the prompt ran, idle after.
  const busy = h.events.flatMap((e) => (e.type === "state" ? [e.state.busy] : []));
  assert.ok(busy.includes(true));
  assert.equal(busy[busy.length - 1], false);
});

test("an approved edit reads and writes through the client and shows its diff", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  const file = path.join(h.workspace, "a.txt");
  writeFileSync(file, "one\ntwo\nthree\n");
  onPermission(h.controller, (id) => h.controller.permissions.answer(id, "allow_once"));
  assert.equal(await h.controller.prompt("edit a.txt"), "end_turn");
  assert.deepEqual(h.reads, [file]);
  assert.deepEqual(h.writes, [{ path: file, content: "two!" }]);
  assert.equal(readFileSync(file, "utf8"), "two!");
  const [tool] = tools(h.controller);
  assert.equal(tool.title, "Edit a.txt");
  assert.equal(tool.status, "completed");
  assert.deepEqual(diffsOf(tool.content), [{ path: file, oldText: "two", newText: "two!" }]);
  const permission = h.controller.transcript.items.find((i) => i.kind === "permission");
  assert.equal(permission?.kind === "permission" && permission.outcome, "allow_once");
  assert.match(h.controller.transcript.lastAgentText(), /Line 2 is two\.chose allow_once$/);
});

test("a rejected edit fails the tool call and writes nothing", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  const file = path.join(h.workspace, "a.txt");
  writeFileSync(file, "one\ntwo\n");
  onPermission(h.controller, (id) => h.controller.permissions.answer(id, "reject_once"));
  assert.equal(await h.controller.prompt("edit a.txt"), "end_turn");
  assert.deepEqual(h.writes, []);
  assert.equal(readFileSync(file, "utf8"), "one\ntwo\n");
  assert.equal(tools(h.controller)[0].status, "failed");
  assert.match(h.controller.transcript.lastAgentText(), /chose reject_once$/);
});

test("stopping while a question is open answers it cancelled and the prompt ends cancelled", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  writeFileSync(path.join(h.workspace, "a.txt"), "one\ntwo\n");
  onPermission(h.controller, () => void h.controller.cancel());
  assert.equal(await h.controller.prompt("edit a.txt"), "cancelled");
  const permission = h.controller.transcript.items.find((i) => i.kind === "permission");
  assert.equal(permission?.kind === "permission" && permission.outcome, "cancelled");
  assert.deepEqual(h.controller.permissions.openIds(), []);
});

test("stop cancels a running prompt", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  h.controller.onEvent((e) => {
    if (e.type === "items" && e.changes.some((c) => c.item.kind === "agent")) void h.controller.cancel();
  });
  assert.equal(await h.controller.prompt("wait"), "cancelled");
  assert.equal(h.controller.transcript.items.at(-1)?.kind, "stop");
  assert.equal(h.controller.state.busy, false);
});

test("a question the agent withdraws is closed without an answer", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  assert.equal(await h.controller.prompt("withdraw"), "end_turn");
  const permission = h.controller.transcript.items.find((i) => i.kind === "permission");
  assert.equal(permission?.kind === "permission" && permission.outcome, "cancelled");
  assert.equal(h.controller.transcript.lastAgentText(), "withdrawn");
});

test("an agent error reply surfaces its message", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  await assert.rejects(h.controller.prompt("fail"), /the model is unavailable/);
  const last = h.controller.transcript.items.at(-1);
  assert.equal(last?.kind, "error");
  assert.equal(h.controller.state.busy, false);
});

test("the agent exiting mid-prompt is reported with its stderr, and the next prompt restarts it", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  await assert.rejects(h.controller.prompt("crash"), /exited with code 3: fake agent: something broke/);
  assert.equal(h.controller.transcript.items.at(-1)?.kind, "error");
  assert.equal(await h.controller.prompt("hello"), "end_turn");
  assert.equal(h.controller.transcript.lastAgentText(), "Hello!");
});

test("a binary that does not exist gives a clear message naming pincer.path", async (t) => {
  const h = harness({ path: "/nonexistent/pincer-binary" });
  t.after(() => h.controller.dispose());
  await assert.rejects(
    h.controller.newSession(),
    /Pincer could not be started: `\/nonexistent\/pincer-binary` was not found; set `pincer.path` to the pincer binary/,
  );
});

test("a binary that exits at once is reported with its stderr", async (t) => {
  const h = harness(fakeSettings(["--exit-at-start"]));
  t.after(() => h.controller.dispose());
  await assert.rejects(h.controller.newSession(), /exited with code 2: fake agent: bad configuration/);
});

test("history: session/list pages are followed and session/load replays the transcript", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  const sessions = await h.controller.listSessions();
  assert.deepEqual(
    sessions.map((s) => [s.sessionId, s.title]),
    [
      ["old-2", "second"],
      ["old-1", "first"],
    ],
  );
  await h.controller.loadSession(sessions[1]);
  assert.equal(h.controller.currentSessionId, "old-1");
  const items = h.controller.transcript.items;
  assert.deepEqual(
    items.map((i) => i.kind),
    ["user", "agent", "tool", "agent"],
  );
  assert.deepEqual(diffsOf((items[2] as ToolItem).content), [{ path: "/w/lib.rs", oldText: "bug", newText: "fix" }]);
  assert.equal(h.controller.transcript.lastAgentText(), "On it. Fixed.");
  await assert.rejects(h.controller.loadSession({ sessionId: "missing", cwd: "/w" }), /missing/);
});

test("pincer.mode is applied to a new session", async (t) => {
  const h = harness({ ...fakeSettings(), mode: "full" });
  t.after(() => h.controller.dispose());
  await h.controller.newSession();
  assert.equal(h.controller.state.modeId, "full");
  assert.deepEqual(
    h.controller.state.modes.map((m) => m.id),
    ["supervised", "full"],
  );
});

test("starting a new session while a prompt runs cancels that prompt", async (t) => {
  const h = harness(fakeSettings());
  t.after(() => h.controller.dispose());
  let running: Promise<string> | undefined;
  const started = new Promise<void>((resolve) =>
    h.controller.onEvent((e) => {
      if (e.type === "items" && e.changes.some((c) => c.item.kind === "agent")) resolve();
    }),
  );
  running = h.controller.prompt("wait");
  await started;
  const first = h.controller.currentSessionId;
  const second = await h.controller.newSession();
  assert.notEqual(second, first);
  assert.equal(await running, "cancelled");
  assert.deepEqual(h.controller.transcript.items, []);
});
