// The agent process: spawns `pincer acp` (or whatever the settings say),
// connects the official ACP SDK's client app to its stdio, and answers the
// agent's requests through a `ClientHost`. Plain TypeScript, no `vscode`.

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { Readable, Writable } from "node:stream";
import {
  client,
  ndJsonStream,
  PROTOCOL_VERSION,
  RequestError,
  type ClientConnection,
  type ContentBlock,
  type InitializeResponse,
  type ListSessionsResponse,
  type LoadSessionResponse,
  type NewSessionResponse,
  type PromptResponse,
  type ReadTextFileRequest,
  type ReadTextFileResponse,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionInfo,
  type SessionNotification,
  type SetSessionConfigOptionResponse,
  type WriteTextFileRequest,
} from "@agentclientprotocol/sdk";
import type { LaunchSpec } from "./config.js";

/** What the agent may ask of the editor. */
export interface ClientHost {
  /** A `session/update`; called synchronously in arrival order. */
  sessionUpdate(notification: SessionNotification): void;
  /** `session/request_permission`; `signal` aborts when the agent withdraws it. */
  requestPermission(request: RequestPermissionRequest, signal: AbortSignal): Promise<RequestPermissionResponse>;
  readTextFile(request: ReadTextFileRequest): Promise<ReadTextFileResponse>;
  writeTextFile(request: WriteTextFileRequest): Promise<void>;
}

export type AgentOptions = {
  /** Advertise `fs.readTextFile` / `fs.writeTextFile` (the host implements them). */
  fileSystem: boolean;
  /** Receives the agent's stderr, line by line (for an output channel). */
  log?: (line: string) => void;
  /** How long `start` waits for `initialize` before giving up. */
  initializeTimeoutMs?: number;
};

/** An error a person can act on: what went wrong, with the agent's last words. */
export class AgentError extends Error {
  constructor(
    message: string,
    readonly code?: number,
  ) {
    super(message);
    this.name = "AgentError";
  }
}

const STDERR_TAIL_BYTES = 4096;
const EXIT_GRACE_MS = 3000;

export class AgentProcess {
  /** The `initialize` answer: capabilities, modes, Pincer's `_meta`. */
  initializeResponse!: InitializeResponse;
  /** Rejects (never resolves) when the process ends or cannot start; every request races it. */
  readonly exited: Promise<never>;
  /** Whether the process is gone; set before `exited` rejects. */
  private gone = false;
  private stderrTail = "";

  private constructor(
    private readonly spec: LaunchSpec,
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly connection: ClientConnection,
    exited: Promise<never>,
  ) {
    this.exited = exited;
  }

  /** Spawns the agent and completes `initialize`; rejects with an `AgentError` saying why it could not. */
  static async start(spec: LaunchSpec, host: ClientHost, options: AgentOptions): Promise<AgentProcess> {
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      throw new AgentError(spawnFailure(spec, e));
    }

    const app = client({ name: "pincer-vscode" })
      .onNotification("session/update", ({ params }) => host.sessionUpdate(params))
      .onRequest("session/request_permission", ({ params, signal }) => host.requestPermission(params, signal))
      .onRequest("fs/read_text_file", ({ params }) => host.readTextFile(params))
      .onRequest("fs/write_text_file", async ({ params }) => {
        await host.writeTextFile(params);
        return {};
      });

    const stream = ndJsonStream(
      Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
      Readable.toWeb(child.stdout) as unknown as ReadableStream<Uint8Array>,
    );
    const connection = app.connect(stream);

    let agent: AgentProcess | undefined;
    const exited = new Promise<never>((_, reject) => {
      child.once("error", (e) => {
        if (agent !== undefined) agent.gone = true;
        reject(new AgentError(spawnFailure(spec, e)));
      });
      child.once("exit", (code, signal) => {
        if (agent !== undefined) agent.gone = true;
        // Let the last stderr lines arrive before quoting them.
        setTimeout(() => {
          const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
          const tail = agent?.stderrTail.trim();
          reject(new AgentError(`Pincer (${spec.command}) ${how}${tail ? `: ${lastLines(tail, 5)}` : ""}`, code ?? undefined));
        }, 50);
      });
    });
    // Nobody may be listening when the process ends quietly after `stop`.
    exited.catch(() => undefined);

    agent = new AgentProcess(spec, child, connection, exited);
    const self = agent;
    child.stdin.on("error", () => undefined);
    child.stderr.setEncoding("utf8");
    let partial = "";
    child.stderr.on("data", (chunk: string) => {
      self.stderrTail = (self.stderrTail + chunk).slice(-STDERR_TAIL_BYTES);
      partial += chunk;
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) options.log?.(line);
    });

    try {
      const timeout = options.initializeTimeoutMs ?? 30_000;
      self.initializeResponse = await self.call(
        withTimeout(
          connection.agent.request("initialize", {
            protocolVersion: PROTOCOL_VERSION,
            clientCapabilities: {
              fs: { readTextFile: options.fileSystem, writeTextFile: options.fileSystem },
              terminal: false,
            },
            clientInfo: { name: "pincer-vscode", version: "0.1.0" },
          }),
          timeout,
          `Pincer (${spec.command} ${spec.args.join(" ")}) did not answer initialize within ${timeout} ms; is pincer.args right?`,
        ),
      );
    } catch (e) {
      await self.stop();
      throw e;
    }
    return self;
  }

  get isRunning(): boolean {
    return !this.gone;
  }

  get supportsList(): boolean {
    return this.initializeResponse.agentCapabilities?.sessionCapabilities?.list != null;
  }

  get supportsLoad(): boolean {
    return this.initializeResponse.agentCapabilities?.loadSession === true;
  }

  newSession(cwd: string): Promise<NewSessionResponse> {
    return this.call(this.connection.agent.request("session/new", { cwd, mcpServers: [] }));
  }

  /** Replays the session's history as `session/update`s (to the host) before it resolves. */
  loadSession(sessionId: string, cwd: string): Promise<LoadSessionResponse> {
    return this.call(this.connection.agent.request("session/load", { sessionId, cwd, mcpServers: [] }));
  }

  /** All sessions, newest first, following `nextCursor` (at most `maxPages` pages). */
  async listSessions(cwd?: string, maxPages = 10): Promise<SessionInfo[]> {
    const sessions: SessionInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < maxPages; page++) {
      const response: ListSessionsResponse = await this.call(
        this.connection.agent.request("session/list", { cwd: cwd ?? null, cursor: cursor ?? null }),
      );
      sessions.push(...response.sessions);
      if (response.nextCursor == null) break;
      cursor = response.nextCursor;
    }
    return sessions;
  }

  prompt(sessionId: string, prompt: string | ContentBlock[]): Promise<PromptResponse> {
    const blocks: ContentBlock[] = typeof prompt === "string" ? [{ type: "text", text: prompt }] : prompt;
    return this.call(this.connection.agent.request("session/prompt", { sessionId, prompt: blocks }));
  }

  /** `session/cancel`: the running prompt ends with `cancelled`. */
  cancel(sessionId: string): Promise<void> {
    return this.call(this.connection.agent.notify("session/cancel", { sessionId }));
  }

  setMode(sessionId: string, modeId: string): Promise<unknown> {
    return this.call(this.connection.agent.request("session/set_mode", { sessionId, modeId }));
  }

  setConfigOption(sessionId: string, configId: string, value: string): Promise<SetSessionConfigOptionResponse> {
    return this.call(this.connection.agent.request("session/set_config_option", { sessionId, configId, value }));
  }

  /** Closes stdin (Pincer then exits cleanly) and kills the process if it lingers. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.gone) {
      this.connection.close();
      return;
    }
    const ended = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.connection.close();
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await ended;
    clearTimeout(timer);
  }

  /** Races a request against the process ending, and names the agent in errors. */
  private async call<T>(request: Promise<T>): Promise<T> {
    try {
      return await Promise.race([request, this.exited]);
    } catch (e) {
      if (e instanceof AgentError) throw e;
      if (e instanceof RequestError) {
        // The agent answered with an error: its message is what happened.
        throw new AgentError(`Pincer: ${e.message}`, e.code);
      }
      // The connection often notices the closed pipe before the process's
      // exit is reported; the exit (code, stderr) says more, so wait for it
      // a little.
      const exit = await Promise.race([
        this.exited.catch((x: unknown) => x),
        new Promise((resolve) => setTimeout(resolve, EXIT_GRACE_MS, undefined)),
      ]);
      if (exit instanceof AgentError) throw exit;
      throw new AgentError(`talking to Pincer (${this.spec.command}) failed: ${messageOf(e)}`);
    }
  }
}

function spawnFailure(spec: LaunchSpec, e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") {
    return `Pincer could not be started: \`${spec.command}\` was not found${spec.cwd ? "" : " on PATH"}; set \`pincer.path\` to the pincer binary`;
  }
  if (code === "EACCES") {
    return `Pincer could not be started: \`${spec.command}\` is not executable; check \`pincer.path\``;
  }
  return `Pincer could not be started (\`${spec.command}\`): ${messageOf(e)}`;
}

function lastLines(text: string, n: number): string {
  return text.split("\n").slice(-n).join("\n");
}

export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new AgentError(message)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
