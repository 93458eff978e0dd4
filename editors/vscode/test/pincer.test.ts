// The extension's client against the real `pincer` binary, launched through
// `launchSpec` as the extension launches it (`pincer.path` + `pincer.args` +
// `pincer.env`), with an isolated data directory and a scripted model.
//
// PINCER_BIN names the binary (default: the repository's target/debug/pincer).

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { RequestPermissionRequest } from "@agentclientprotocol/sdk";
import type { PincerSettings } from "../src/config.js";
import { diffsOf, type ToolItem } from "../src/session.js";
import { harness, packageRoot, tempDir } from "./helpers.js";

const pincerBin = path.resolve(packageRoot, process.env.PINCER_BIN ?? "../../target/debug/pincer");

test("the pincer binary is there", () => {
  assert.ok(existsSync(pincerBin), `no pincer binary at ${pincerBin}: run \`cargo build\` or set PINCER_BIN`);
});

/** Settings for a scripted Pincer with its own data and config directories. */
function pincerSettings(script: string[], dataDir = tempDir("pincer-data-")): Partial<PincerSettings> & { dataDir: string } {
  const scriptFile = path.join(tempDir("pincer-script-"), "model.jsonl");
  writeFileSync(scriptFile, script.join("\n") + "\n");
  return {
    path: pincerBin,
    args: ["acp", "--script", scriptFile],
    env: { PINCER_DATA_DIR: dataDir, XDG_CONFIG_HOME: tempDir("pincer-config-"), PINCER_MODE: "supervised" },
    dataDir,
  };
}

test("a prompt to the real binary streams its reply and ends with end_turn", async (t) => {
  const settings = pincerSettings([
    JSON.stringify([{ text: "Hello " }, { text: "from Pincer" }, { usage: { input_tokens: 12, output_tokens: 3 } }]),
  ]);
  const h = harness(settings);
  t.after(() => h.controller.dispose());
  assert.equal(await h.controller.prompt("hi"), "end_turn");
  assert.equal(h.controller.transcript.lastAgentText(), "Hello from Pincer");
  const streamed = h.events.flatMap((e) =>
    e.type === "items" ? e.changes.filter((c) => c.item.kind === "agent").map((c) => (c.item as { text: string }).text) : [],
  );
  assert.deepEqual(streamed, ["Hello ", "Hello from Pincer"]);
  assert.equal(h.controller.transcript.items.at(-1)?.kind, "stop");
  assert.ok(h.controller.state.modes.some((m) => m.id === "supervised"), "Pincer's modes reach the view");
  const usage = h.controller.transcript.usage;
  assert.equal(usage?.used, 15, `usage_update is folded in: ${JSON.stringify(usage)}`);
  assert.ok((usage?.size ?? 0) > 0);
});

test("a write the model asks for waits for approval, shows its diff, and lands through fs/write_text_file", async (t) => {
  const settings = pincerSettings([
    JSON.stringify([{ text: "Writing." }, { tool_call: { name: "write_file", arguments: { path: "a.txt", content: "x\n" } } }]),
    JSON.stringify([{ text: "Done." }]),
  ]);
  const h = harness(settings);
  t.after(() => h.controller.dispose());
  const asked: RequestPermissionRequest[] = [];
  h.controller.onEvent((e) => {
    if (e.type !== "permission") return;
    asked.push(e.pending.request);
    queueMicrotask(() => h.controller.permissions.answer(e.pending.id, "allow_once"));
  });
  assert.equal(await h.controller.prompt("write a.txt"), "end_turn");
  const file = path.join(h.workspace, "a.txt");
  assert.deepEqual(
    asked.map((r) => r.options.map((o) => o.optionId)),
    [["allow_once", "allow_always", "reject_once", "reject_always"]],
  );
  // The question carries the diff, so the view can show it before answering.
  assert.deepEqual(diffsOf(asked[0].toolCall.content ?? []), [{ path: file, oldText: null, newText: "x\n" }]);
  assert.deepEqual(h.writes, [{ path: file, content: "x\n" }]);
  assert.equal(readFileSync(file, "utf8"), "x\n");
  const tool = h.controller.transcript.items.find((i): i is ToolItem => i.kind === "tool");
  assert.equal(tool?.title, "Create a.txt");
  assert.equal(tool?.status, "completed");
  assert.deepEqual(diffsOf(tool?.content ?? []), [{ path: file, oldText: null, newText: "x\n" }]);
  assert.equal(h.controller.transcript.lastAgentText(), "Writing.Done.");
});

test("a read goes through fs/read_text_file, so Pincer sees the editor's unsaved text", async (t) => {
  const settings = pincerSettings([
    JSON.stringify([{ tool_call: { name: "read_file", arguments: { path: "notes.txt" } } }]),
    JSON.stringify([{ text: "Read it." }]),
  ]);
  const workspace = tempDir("pincer-ws-");
  const file = path.join(workspace, "notes.txt");
  writeFileSync(file, "saved text\n");
  const h = harness(settings, workspace, { [file]: "unsaved text\n" });
  t.after(() => h.controller.dispose());
  assert.equal(await h.controller.prompt("read notes.txt"), "end_turn");
  assert.ok(h.reads.includes(file), `reads: ${JSON.stringify(h.reads)}`);
  const tool = h.controller.transcript.items.find((i): i is ToolItem => i.kind === "tool");
  assert.equal(tool?.status, "completed");
  const seen = (tool?.content ?? []).map((c) => (c.type === "content" && c.content.type === "text" ? c.content.text : c.type));
  assert.deepEqual(seen, ["unsaved text\n"]);
});

test("a rejected write is not made and the prompt goes on", async (t) => {
  const settings = pincerSettings([
    JSON.stringify([{ tool_call: { name: "write_file", arguments: { path: "a.txt", content: "x\n" } } }]),
    JSON.stringify([{ text: "Understood." }]),
  ]);
  const h = harness(settings);
  t.after(() => h.controller.dispose());
  h.controller.onEvent((e) => {
    if (e.type === "permission") queueMicrotask(() => h.controller.permissions.answer(e.pending.id, "reject_once"));
  });
  assert.equal(await h.controller.prompt("write a.txt"), "end_turn");
  assert.deepEqual(h.writes, []);
  assert.equal(existsSync(path.join(h.workspace, "a.txt")), false);
  const tool = h.controller.transcript.items.find((i): i is ToolItem => i.kind === "tool");
  assert.equal(tool?.status, "failed");
  assert.equal(h.controller.transcript.lastAgentText(), "Understood.");
});

test("stop while Pincer waits for approval ends the prompt cancelled", async (t) => {
  const settings = pincerSettings([
    JSON.stringify([{ tool_call: { name: "write_file", arguments: { path: "a.txt", content: "x\n" } } }]),
  ]);
  const h = harness(settings);
  t.after(() => h.controller.dispose());
  h.controller.onEvent((e) => {
    if (e.type === "permission") queueMicrotask(() => void h.controller.cancel());
  });
  assert.equal(await h.controller.prompt("write a.txt"), "cancelled");
  assert.equal(existsSync(path.join(h.workspace, "a.txt")), false);
});

test("history: a session is listed and loads with its transcript in a new process", async (t) => {
  const settings = pincerSettings([JSON.stringify([{ text: "Hello from Pincer" }])]);
  const first = harness(settings);
  assert.equal(await first.controller.prompt("hi there"), "end_turn");
  const sessionId = first.controller.currentSessionId;
  await first.controller.dispose();

  const second = harness(settings, first.workspace);
  t.after(() => second.controller.dispose());
  const sessions = await second.controller.listSessions();
  const listed = sessions.find((s) => s.sessionId === sessionId);
  assert.ok(listed, `session ${sessionId} is in session/list: ${JSON.stringify(sessions)}`);
  await second.controller.loadSession(listed);
  const items = second.controller.transcript.items;
  assert.deepEqual(
    items.map((i) => (i.kind === "user" || i.kind === "agent" ? `${i.kind}: ${i.text}` : i.kind)),
    ["user: hi there", "agent: Hello from Pincer"],
  );
});

test("a script error surfaces Pincer's message", async (t) => {
  const settings = pincerSettings([JSON.stringify([{ error: { kind: "server", message: "overloaded" } }])]);
  const h = harness(settings);
  t.after(() => h.controller.dispose());
  await assert.rejects(h.controller.prompt("hi"), /^AgentError: Pincer: .*overloaded/);
});
