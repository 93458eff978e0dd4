// The chat controller: one agent process, the current session, its
// transcript and open permission questions. The chat view is a thin
// renderer of the events this emits; the tests drive it directly.

import type { ReadTextFileRequest, SessionInfo, StopReason } from "@agentclientprotocol/sdk";
import { AgentError, AgentProcess, messageOf, type ClientHost } from "./agent.js";
import { sliceLines, type LaunchSpec, type PincerSettings } from "./config.js";
import { PermissionBroker, type PendingPermission } from "./permissions.js";
import { Transcript, type TranscriptItem, type Usage } from "./session.js";

/** Where the agent's file reads and writes land: the workspace in the editor, the disk in tests. */
export interface FileAccess {
  readTextFile(path: string): Promise<string>;
  writeTextFile(path: string, content: string): Promise<void>;
}

export type ChatState = {
  busy: boolean;
  sessionId: string | undefined;
  title: string | undefined;
  usage: Usage | undefined;
  modeId: string | undefined;
  modes: { id: string; name: string }[];
};

export type ChatEvent =
  | { type: "reset"; items: TranscriptItem[] }
  /** Items added or changed, as snapshots (later updates do not change them). */
  | { type: "items"; changes: { index: number; item: TranscriptItem }[] }
  | { type: "state"; state: ChatState }
  | { type: "permission"; pending: PendingPermission }
  | { type: "permissionSettled"; id: string; outcome: string };

export type ControllerDeps = {
  /** The launch, read from the settings each time a process starts. */
  launch(): LaunchSpec;
  settings(): Pick<PincerSettings, "mode" | "model">;
  /** The session's working directory (absolute). */
  cwd(): string;
  files: FileAccess;
  log?: (line: string) => void;
};

export class ChatController {
  transcript = new Transcript();
  private agent: AgentProcess | undefined;
  private starting: Promise<AgentProcess> | undefined;
  private sessionId: string | undefined;
  private modes: { id: string; name: string }[] = [];
  private busy = false;
  private readonly listeners = new Set<(event: ChatEvent) => void>();
  readonly permissions: PermissionBroker;

  constructor(private readonly deps: ControllerDeps) {
    this.permissions = new PermissionBroker({
      asked: (pending) => {
        this.emitItems(this.transcript.addPermission(pending.id, pending.request));
        this.emit({ type: "permission", pending });
      },
      settled: (id, outcome) => {
        this.emitItems(this.transcript.resolvePermission(id, outcome));
        this.emit({ type: "permissionSettled", id, outcome });
      },
    });
  }

  onEvent(listener: (event: ChatEvent) => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  get state(): ChatState {
    return {
      busy: this.busy,
      sessionId: this.sessionId,
      title: this.transcript.title,
      usage: this.transcript.usage,
      modeId: this.transcript.currentModeId,
      modes: this.modes,
    };
  }

  get currentSessionId(): string | undefined {
    return this.sessionId;
  }

  /** Starts a fresh session (and the agent, if it is not running). */
  async newSession(): Promise<string> {
    const agent = await this.ensureAgent();
    await this.stopRunningPrompt();
    const response = await agent.newSession(this.deps.cwd());
    this.sessionId = response.sessionId;
    this.transcript = new Transcript();
    this.transcript.currentModeId = response.modes?.currentModeId;
    this.modes = (response.modes?.availableModes ?? []).map((m) => ({ id: m.id, name: m.name }));
    const { mode, model } = this.deps.settings();
    if (mode !== "" && mode !== this.transcript.currentModeId) {
      await agent.setMode(response.sessionId, mode);
      this.transcript.currentModeId = mode;
    }
    if (model !== "") {
      await agent.setConfigOption(response.sessionId, "model", model);
    }
    this.emit({ type: "reset", items: this.transcript.items });
    this.emitState();
    return response.sessionId;
  }

  /** Sends a prompt, starting a session first if there is none; resolves with the stop reason. */
  async prompt(text: string): Promise<StopReason> {
    if (this.busy) throw new AgentError("Pincer is still answering; stop it or wait");
    let agent: AgentProcess;
    try {
      agent = await this.ensureAgent();
      if (this.sessionId === undefined) await this.newSession();
    } catch (e) {
      this.emitItems(this.transcript.addError(messageOf(e)));
      throw e;
    }
    const sessionId = this.sessionId as string;
    // The view may have moved to another session by the time this one answers.
    const transcript = this.transcript;
    const record = (indices: number[]) => {
      if (this.transcript === transcript) this.emitItems(indices);
    };
    record(transcript.addUserMessage(text));
    this.setBusy(true);
    try {
      const response = await agent.prompt(sessionId, text);
      record(transcript.addStop(response.stopReason));
      return response.stopReason;
    } catch (e) {
      record(transcript.addError(messageOf(e)));
      throw e;
    } finally {
      this.permissions.cancelAll(sessionId);
      this.setBusy(false);
      this.emitState();
    }
  }

  /** Stops the running prompt: open questions are dismissed, then `session/cancel`. */
  async cancel(): Promise<void> {
    if (this.sessionId === undefined || this.agent === undefined) return;
    this.permissions.cancelAll(this.sessionId);
    await this.agent.cancel(this.sessionId);
  }

  /** Leaving a session while it answers: its prompt is cancelled rather than left running unseen. */
  private async stopRunningPrompt(): Promise<void> {
    this.permissions.cancelAll();
    if (this.busy && this.sessionId !== undefined && this.agent?.isRunning) {
      await this.agent.cancel(this.sessionId);
    }
  }

  async listSessions(): Promise<SessionInfo[]> {
    const agent = await this.ensureAgent();
    if (!agent.supportsList) throw new AgentError("this agent does not list sessions (no sessionCapabilities.list)");
    return agent.listSessions();
  }

  /** Opens a stored session: the transcript is rebuilt from the agent's replay. */
  async loadSession(info: Pick<SessionInfo, "sessionId" | "cwd" | "title">): Promise<void> {
    const agent = await this.ensureAgent();
    if (!agent.supportsLoad) throw new AgentError("this agent cannot load sessions (no loadSession capability)");
    await this.stopRunningPrompt();
    this.sessionId = info.sessionId;
    this.transcript = new Transcript();
    this.transcript.title = info.title ?? undefined;
    this.emit({ type: "reset", items: this.transcript.items });
    try {
      const response = await agent.loadSession(info.sessionId, info.cwd);
      if (response?.modes) {
        this.transcript.currentModeId = response.modes.currentModeId;
        this.modes = response.modes.availableModes.map((m) => ({ id: m.id, name: m.name }));
      }
    } catch (e) {
      this.sessionId = undefined;
      this.emitItems(this.transcript.addError(messageOf(e)));
      throw e;
    } finally {
      this.emitState();
    }
  }

  async setMode(modeId: string): Promise<void> {
    if (this.sessionId === undefined || this.agent === undefined) return;
    await this.agent.setMode(this.sessionId, modeId);
    this.transcript.currentModeId = modeId;
    this.emitState();
  }

  /** Ends the agent process (the settings changed); the next action starts a new one. */
  async stopAgent(): Promise<void> {
    this.permissions.cancelAll();
    const agent = this.agent;
    this.agent = undefined;
    this.sessionId = undefined;
    await agent?.stop();
    this.emitState();
  }

  async dispose(): Promise<void> {
    await this.stopAgent();
    this.listeners.clear();
  }

  private async ensureAgent(): Promise<AgentProcess> {
    if (this.agent?.isRunning) return this.agent;
    if (this.starting !== undefined) return this.starting;
    if (this.agent !== undefined) {
      // It died: its sessions are gone from this connection.
      this.agent = undefined;
      this.sessionId = undefined;
    }
    this.starting = AgentProcess.start(this.deps.launch(), this.host(), { fileSystem: true, log: this.deps.log });
    try {
      const agent = await this.starting;
      this.agent = agent;
      agent.exited.catch((e: unknown) => {
        if (this.agent !== agent) return;
        this.permissions.cancelAll();
        this.emitItems(this.transcript.addError(messageOf(e)));
        this.emitState();
      });
      return agent;
    } finally {
      this.starting = undefined;
    }
  }

  private host(): ClientHost {
    return {
      sessionUpdate: (n) => {
        if (n.sessionId !== this.sessionId) return;
        const changed = this.transcript.apply(n.update);
        this.emitItems(changed);
        if (changed.length === 0) this.emitState();
      },
      requestPermission: (request, signal) => this.permissions.ask(request, signal),
      readTextFile: async (request: ReadTextFileRequest) => {
        const text = await this.deps.files.readTextFile(request.path);
        return { content: sliceLines(text, request.line, request.limit) };
      },
      writeTextFile: (request) => this.deps.files.writeTextFile(request.path, request.content),
    };
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    this.emitState();
  }

  private emitState(): void {
    this.emit({ type: "state", state: this.state });
  }

  private emitItems(indices: number[]): void {
    if (indices.length === 0) return;
    const items = this.transcript.items;
    this.emit({ type: "items", changes: indices.map((index) => ({ index, item: structuredClone(items[index]) })) });
  }

  private emit(event: ChatEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}
