// A fake ACP agent built on the SDK's agent side, run as a child process over
// stdio exactly as Pincer would be. What it does depends on the prompt text:
//
//   hello     thought, three message chunks, a plan, usage, end_turn
//   edit      reads FILE via fs/read_text_file (line 2, limit 1), proposes a
//             diff, asks permission; allow writes via fs/write_text_file and
//             completes, reject fails the call; ends end_turn (cancelled if
//             the question was dismissed)
//   wait      streams a chunk, then waits for session/cancel
//   withdraw  asks permission, withdraws the request after 100 ms, end_turn
//   crash     streams a chunk, writes to stderr, exits with code 3
//   fail      answers with a JSON-RPC error
//
// Arguments: `--exit-at-start` exits before reading anything (a broken binary).

import { Readable, Writable } from "node:stream";
import * as path from "node:path";
import { agent, ndJsonStream, RequestError, type AgentContext, type RequestPermissionResponse, type SessionUpdate } from "@agentclientprotocol/sdk";

if (process.argv.includes("--exit-at-start")) {
  process.stderr.write("fake agent: bad configuration\n");
  process.exit(2);
}

const cancelled = new Map<string, () => void>();
let sessionCount = 0;
const sessionCwd = new Map<string, string>();

async function update(client: AgentContext, sessionId: string, u: SessionUpdate): Promise<void> {
  await client.notify("session/update", { sessionId, update: u });
}

const text = (t: string) => ({ type: "text" as const, text: t });

const app = agent({ name: "fake-agent" })
  .onRequest("initialize", () => ({
    protocolVersion: 1,
    agentCapabilities: { loadSession: true, sessionCapabilities: { list: {} } },
    authMethods: [],
  }))
  .onRequest("session/new", ({ params }) => {
    const sessionId = `fake-${++sessionCount}`;
    sessionCwd.set(sessionId, params.cwd);
    return {
      sessionId,
      modes: {
        currentModeId: "supervised",
        availableModes: [
          { id: "supervised", name: "Supervised" },
          { id: "full", name: "Full" },
        ],
      },
    };
  })
  .onRequest("session/set_mode", () => ({}))
  .onRequest("session/list", ({ params }) => {
    // Two pages, to check the client follows nextCursor.
    if (params.cursor == null) {
      return { sessions: [{ sessionId: "old-2", cwd: "/w", title: "second", updatedAt: "2026-01-02T00:00:00Z" }], nextCursor: "p2" };
    }
    return { sessions: [{ sessionId: "old-1", cwd: "/w", title: "first", updatedAt: "2026-01-01T00:00:00Z" }] };
  })
  .onRequest("session/load", async ({ params, client }) => {
    if (params.sessionId !== "old-1") throw RequestError.resourceNotFound(params.sessionId);
    const s = params.sessionId;
    await update(client, s, { sessionUpdate: "user_message_chunk", content: text("fix the bug") });
    await update(client, s, { sessionUpdate: "agent_message_chunk", content: text("On it. ") });
    await update(client, s, {
      sessionUpdate: "tool_call",
      toolCallId: "t1",
      title: "Edit lib.rs",
      kind: "edit",
      status: "completed",
      content: [{ type: "diff", path: "/w/lib.rs", oldText: "bug", newText: "fix" }],
    });
    await update(client, s, { sessionUpdate: "agent_message_chunk", content: text("Fixed.") });
    return {};
  })
  .onNotification("session/cancel", ({ params }) => {
    cancelled.get(params.sessionId)?.();
  })
  .onRequest("session/prompt", async ({ params, client }) => {
    const s = params.sessionId;
    const prompt = params.prompt.map((b) => (b.type === "text" ? b.text : "")).join("");
    const [command, arg] = prompt.split(" ");
    switch (command) {
      case "hello": {
        await update(client, s, { sessionUpdate: "agent_thought_chunk", content: text("Greeting. ") });
        for (const t of ["Hel", "lo", "!"]) {
          await update(client, s, { sessionUpdate: "agent_message_chunk", content: text(t) });
        }
        await update(client, s, {
          sessionUpdate: "plan",
          entries: [{ content: "say hello", priority: "high", status: "completed" }],
        });
        await update(client, s, { sessionUpdate: "usage_update", used: 15, size: 1000 });
        return { stopReason: "end_turn" };
      }
      case "edit": {
        const file = path.resolve(sessionCwd.get(s) ?? "/", arg ?? "a.txt");
        const read = await client.request("fs/read_text_file", { sessionId: s, path: file, line: 2, limit: 1 });
        const newText = `${read.content}!`;
        await update(client, s, { sessionUpdate: "agent_message_chunk", content: text(`Line 2 is ${read.content}.`) });
        const diff = { type: "diff" as const, path: file, oldText: read.content, newText };
        await update(client, s, { sessionUpdate: "tool_call", toolCallId: "c1", title: "write_file", kind: "edit", status: "pending" });
        await update(client, s, { sessionUpdate: "tool_call_update", toolCallId: "c1", title: `Edit ${arg}`, content: [diff] });
        const answer: RequestPermissionResponse = await client.request("session/request_permission", {
          sessionId: s,
          toolCall: { toolCallId: "c1", title: `Edit ${arg}`, kind: "edit", status: "pending", content: [diff] },
          options: [
            { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
            { optionId: "reject_once", name: "Reject", kind: "reject_once" },
          ],
        });
        if (answer.outcome.outcome === "cancelled") return { stopReason: "cancelled" };
        if (answer.outcome.optionId === "allow_once") {
          await client.request("fs/write_text_file", { sessionId: s, path: file, content: newText });
          await update(client, s, { sessionUpdate: "tool_call_update", toolCallId: "c1", status: "completed" });
        } else {
          await update(client, s, { sessionUpdate: "tool_call_update", toolCallId: "c1", status: "failed" });
        }
        await update(client, s, { sessionUpdate: "agent_message_chunk", content: text(`chose ${answer.outcome.optionId}`) });
        return { stopReason: "end_turn" };
      }
      case "wait": {
        await update(client, s, { sessionUpdate: "agent_message_chunk", content: text("waiting") });
        await new Promise<void>((resolve) => cancelled.set(s, resolve));
        cancelled.delete(s);
        return { stopReason: "cancelled" };
      }
      case "withdraw": {
        const abort = new AbortController();
        setTimeout(() => abort.abort(), 100);
        try {
          await client.request(
            "session/request_permission",
            {
              sessionId: s,
              toolCall: { toolCallId: "c2", title: "Run it", kind: "execute", status: "pending" },
              options: [{ optionId: "allow_once", name: "Allow once", kind: "allow_once" }],
            },
            { cancellationSignal: abort.signal },
          );
        } catch {
          // withdrawn
        }
        await update(client, s, { sessionUpdate: "agent_message_chunk", content: text("withdrawn") });
        return { stopReason: "end_turn" };
      }
      case "crash": {
        await update(client, s, { sessionUpdate: "agent_message_chunk", content: text("about to crash") });
        process.stderr.write("fake agent: something broke\n");
        setTimeout(() => process.exit(3), 20);
        return new Promise(() => undefined);
      }
      case "fail":
        throw RequestError.internalError({ why: "scripted" }, "the model is unavailable");
      default:
        throw RequestError.invalidParams(undefined, `unknown fake command ${command}`);
    }
  });

app.connect(ndJsonStream(Writable.toWeb(process.stdout) as WritableStream<Uint8Array>, Readable.toWeb(process.stdin) as unknown as ReadableStream<Uint8Array>));
