// The bundled extension (dist/extension.cjs, as VS Code loads it), activated
// against a fake `vscode` module and driving the fake agent: commands, the
// chat view's messages, approvals, diffs and history.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import Module, { createRequire } from "node:module";
import * as path from "node:path";
import { createFakeVscode, fakeWebviewView, Uri } from "./fakeVscode.js";
import { fakeAgentScript, packageRoot, tempDir } from "./helpers.js";

const bundle = path.join(packageRoot, "dist", "extension.cjs");
const manifest = JSON.parse(readFileSync(path.join(packageRoot, "package.json"), "utf8"));

type Loaded = { activate(context: unknown): void };

/** Loads a fresh copy of the bundle with `vscode` resolving to the fake. */
function loadExtension(fake: unknown): Loaded {
  assert.ok(existsSync(bundle), `no bundle at ${bundle}: run \`npm run build\``);
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = (request: string, ...rest: unknown[]) => (request === "vscode" ? fake : original(request, ...rest));
  try {
    const require = createRequire(import.meta.url);
    delete require.cache[bundle];
    return require(bundle) as Loaded;
  } finally {
    loader._load = original;
  }
}

function activate(visible = true) {
  const workspace = tempDir("pincer-ext-ws-");
  const { vscode, record } = createFakeVscode(workspace, { "pincer.path": process.execPath, "pincer.args": [fakeAgentScript] });
  const subscriptions: { dispose(): unknown }[] = [];
  loadExtension(vscode).activate({ subscriptions, extensionUri: Uri.file(packageRoot) });
  const chat = fakeWebviewView(visible);
  record.views.get("pincer.chat")?.resolveWebviewView(chat.view);
  const dispose = () => Promise.all(subscriptions.map((s) => s.dispose()));
  return { workspace, record, chat, dispose };
}

/** Waits until `predicate` holds for the messages posted so far. */
async function until<T>(what: string, probe: () => T | undefined, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The latest version of every item the view was sent. */
function viewItems(messages: any[]): any[] {
  let items: any[] = [];
  for (const m of messages) {
    if (m.type === "reset") items = [...m.items];
    if (m.type === "items") for (const c of m.changes) items[c.index] = c.item;
  }
  return items;
}

test("activation registers the manifest's commands, the chat view and the diff scheme", async (t) => {
  const { record, chat, dispose } = activate();
  t.after(dispose);
  const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  assert.deepEqual([...record.commands.keys()].sort(), contributed);
  assert.deepEqual([...record.views.keys()], manifest.contributes.views.pincer.map((v: { id: string }) => v.id));
  assert.deepEqual([...record.contentProviders.keys()], ["pincer-diff"]);
  const html = chat.view.webview.html;
  const nonce = /script-src 'nonce-([a-z0-9]+)'/.exec(html)?.[1];
  assert.ok(nonce, "the CSP allows scripts by nonce only");
  assert.match(html, new RegExp(`<script nonce="${nonce}" src="[^"]*/media/chat.js">`));
  assert.ok(existsSync(path.join(packageRoot, "media", "chat.js")));
});

test("a prompt from the view streams back as items, and Stop is offered while busy", async (t) => {
  const { chat, dispose } = activate();
  t.after(dispose);
  chat.send({ type: "ready" });
  assert.deepEqual(chat.messages.slice(0, 2).map((m) => m.type), ["reset", "state"]);
  chat.send({ type: "prompt", text: "hello" });
  await until("the stop item", () => viewItems(chat.messages).some((i) => i.kind === "stop"));
  const items = viewItems(chat.messages);
  assert.deepEqual(items.map((i) => i.kind), ["user", "thought", "agent", "plan", "stop"]);
  assert.equal(items[2].text, "Hello!");
  const busy = chat.messages.filter((m) => m.type === "state").map((m) => m.state.busy);
  assert.ok(busy.includes(true) && busy.at(-1) === false, `busy went ${busy}`);
});

test("an approval answered in the view writes through the workspace, and Show diff opens vscode.diff", async (t) => {
  const { workspace, record, chat, dispose } = activate();
  t.after(dispose);
  const file = path.join(workspace, "a.txt");
  writeFileSync(file, "one\ntwo\n");
  chat.send({ type: "prompt", text: "edit a.txt" });
  const question = await until("the approval", () => viewItems(chat.messages).find((i) => i.kind === "permission"));
  assert.equal(question.title, "Edit a.txt");
  assert.equal(record.quickPicks.length, 0, "no quick pick while the chat is visible");
  chat.send({ type: "permission", id: question.requestId, optionId: "allow_once" });
  await until("the stop item", () => viewItems(chat.messages).some((i) => i.kind === "stop"));
  assert.equal(readFileSync(file, "utf8"), "two!");
  const index = viewItems(chat.messages).findIndex((i) => i.kind === "tool");
  assert.equal(viewItems(chat.messages)[index].status, "completed");

  chat.send({ type: "showDiff", index, diff: 0 });
  const call = await until("vscode.diff", () => record.executed.find((e) => e.id === "vscode.diff"));
  const [left, right, title] = call.args as [Uri, Uri, string];
  const provider = record.contentProviders.get("pincer-diff");
  assert.equal(left.path, file);
  assert.equal(provider?.provideTextDocumentContent(left), "two");
  assert.equal(provider?.provideTextDocumentContent(right), "two!");
  assert.equal(title, "a.txt (Pincer's edit)");
});

test("with the chat hidden, an approval also comes up as a quick pick", async (t) => {
  const { workspace, record, chat, dispose } = activate(false);
  t.after(dispose);
  writeFileSync(path.join(workspace, "a.txt"), "one\ntwo\n");
  record.pickLabel = "Reject";
  chat.send({ type: "prompt", text: "edit a.txt" });
  await until("the stop item", () => viewItems(chat.messages).some((i) => i.kind === "stop"));
  assert.equal(record.quickPicks.length, 1);
  assert.equal(record.quickPicks[0].options.title, "Pincer asks: Edit a.txt");
  assert.deepEqual(record.quickPicks[0].items.map((i) => i.label), ["Allow once", "Reject"]);
  assert.equal(readFileSync(path.join(workspace, "a.txt"), "utf8"), "one\ntwo\n");
  assert.equal(viewItems(chat.messages).find((i) => i.kind === "permission").outcome, "reject_once");
});

test("the sessions command lists history and loads the picked session into the view", async (t) => {
  const { record, chat, dispose } = activate();
  t.after(dispose);
  record.pickLabel = "first";
  await record.commands.get("pincer.sessions")?.();
  assert.deepEqual(record.errors, []);
  assert.deepEqual(record.quickPicks[0].items.map((i) => i.label), ["second", "first"]);
  const items = viewItems(chat.messages);
  assert.deepEqual(items.map((i) => i.kind), ["user", "agent", "tool", "agent"]);
  assert.equal(chat.messages.filter((m) => m.type === "state").at(-1).state.sessionId, "old-1");
});

test("a bad pincer.path shows a clear error in the chat", async (t) => {
  const workspace = tempDir("pincer-ext-ws-");
  const { vscode, record } = createFakeVscode(workspace, { "pincer.path": "/nonexistent/pincer" });
  const subscriptions: { dispose(): unknown }[] = [];
  loadExtension(vscode).activate({ subscriptions, extensionUri: Uri.file(packageRoot) });
  t.after(() => Promise.all(subscriptions.map((s) => s.dispose())));
  const chat = fakeWebviewView();
  record.views.get("pincer.chat")?.resolveWebviewView(chat.view);
  chat.send({ type: "prompt", text: "hello" });
  const error = await until("the error item", () => viewItems(chat.messages).find((i) => i.kind === "error"));
  assert.match(error.text, /`\/nonexistent\/pincer` was not found; set `pincer.path`/);
  await record.commands.get("pincer.newSession")?.();
  assert.match(record.errors[0], /was not found/);
});
