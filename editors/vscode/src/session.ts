// The session model: folds `session/update` notifications into a transcript
// the chat view renders. Plain TypeScript, no `vscode` import, so the tests
// drive it directly.

import type {
  AvailableCommand,
  ContentBlock,
  PermissionOption,
  PlanEntry,
  RequestPermissionRequest,
  SessionUpdate,
  StopReason,
  ToolCallContent,
  ToolCallStatus,
  ToolKind,
} from "@agentclientprotocol/sdk";

export type ChunkItem = {
  kind: "user" | "agent" | "thought";
  text: string;
  messageId?: string;
};

export type ToolItem = {
  kind: "tool";
  toolCallId: string;
  title: string;
  toolKind?: ToolKind;
  status: ToolCallStatus;
  content: ToolCallContent[];
  locations: string[];
  rawInput?: unknown;
};

export type PermissionItem = {
  kind: "permission";
  /** The key the view answers with (`PermissionBroker` ids). */
  requestId: string;
  toolCallId: string;
  title: string;
  options: PermissionOption[];
  /** The tool call's content as asked (its diff, for edits). */
  content: ToolCallContent[];
  /** The chosen `optionId`, `"cancelled"`, or absent while the question is open. */
  outcome?: string;
};

export type PlanItem = { kind: "plan"; entries: PlanEntry[] };

export type NoticeItem = { kind: "notice" | "error"; text: string };

export type StopItem = { kind: "stop"; stopReason: StopReason };

export type TranscriptItem = ChunkItem | ToolItem | PermissionItem | PlanItem | NoticeItem | StopItem;

export type Usage = { used: number; size: number; cost?: { amount: number; currency: string } | null };

export type Diff = { path: string; oldText: string | null; newText: string };

/** Text shown for a content block; non-text blocks become a short marker. */
export function blockText(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "resource_link":
      return `[${block.name}](${block.uri})`;
    case "resource":
      return "text" in block.resource ? block.resource.text : `[${block.resource.uri}]`;
    case "image":
      return "[image]";
    case "audio":
      return "[audio]";
  }
}

/** The diffs of a tool call's content, in order. */
export function diffsOf(content: ToolCallContent[]): Diff[] {
  const diffs: Diff[] = [];
  for (const c of content) {
    if (c.type === "diff") {
      diffs.push({ path: c.path, oldText: c.oldText ?? null, newText: c.newText });
    }
  }
  return diffs;
}

/**
 * A transcript of one session. Every mutating method returns the indices of
 * the items it added or changed, so a view can re-render only those.
 */
export class Transcript {
  readonly items: TranscriptItem[] = [];
  availableCommands: AvailableCommand[] = [];
  usage: Usage | undefined;
  currentModeId: string | undefined;
  title: string | undefined;
  /** Where each tool call lives in `items`, to apply its updates in place. */
  private readonly toolIndex = new Map<string, number>();
  /** The plan of the current turn: a plan update replaces the whole plan. */
  private planIndex: number | undefined;

  apply(update: SessionUpdate): number[] {
    switch (update.sessionUpdate) {
      case "user_message_chunk":
        this.planIndex = undefined;
        return this.chunk("user", blockText(update.content), update.messageId);
      case "agent_message_chunk":
        return this.chunk("agent", blockText(update.content), update.messageId);
      case "agent_thought_chunk":
        return this.chunk("thought", blockText(update.content), update.messageId);
      case "tool_call": {
        const item: ToolItem = {
          kind: "tool",
          toolCallId: update.toolCallId,
          title: update.title,
          toolKind: update.kind,
          status: update.status ?? "pending",
          content: update.content ?? [],
          locations: (update.locations ?? []).map((l) => l.path),
          rawInput: update.rawInput,
        };
        const known = this.toolIndex.get(update.toolCallId);
        if (known !== undefined) {
          this.items[known] = item;
          return [known];
        }
        return [this.push(item, update.toolCallId)];
      }
      case "tool_call_update": {
        let index = this.toolIndex.get(update.toolCallId);
        if (index === undefined) {
          index = this.push(
            { kind: "tool", toolCallId: update.toolCallId, title: update.toolCallId, status: "pending", content: [], locations: [] },
            update.toolCallId,
          );
        }
        const item = this.items[index] as ToolItem;
        if (update.title != null) item.title = update.title;
        if (update.kind != null) item.toolKind = update.kind;
        if (update.status != null) item.status = update.status;
        if (update.content != null) item.content = update.content;
        if (update.locations != null) item.locations = update.locations.map((l) => l.path);
        if (update.rawInput !== undefined) item.rawInput = update.rawInput;
        return [index];
      }
      case "plan": {
        const item: PlanItem = { kind: "plan", entries: update.entries };
        if (this.planIndex !== undefined) {
          this.items[this.planIndex] = item;
          return [this.planIndex];
        }
        this.planIndex = this.push(item);
        return [this.planIndex];
      }
      case "available_commands_update":
        this.availableCommands = update.availableCommands;
        return [];
      case "current_mode_update":
        this.currentModeId = update.currentModeId;
        return [];
      case "session_info_update":
        if (update.title != null) this.title = update.title;
        return [];
      case "usage_update":
        this.usage = { used: update.used, size: update.size, cost: update.cost };
        return [];
      case "notice":
        return [this.push({ kind: "notice", text: update.description ? `${update.title}: ${update.description}` : update.title })];
      default:
        // config_option_update, compaction updates and variants from newer
        // agents change nothing the transcript shows.
        return [];
    }
  }

  /** The user's own prompt, shown at once rather than waiting for an echo. */
  addUserMessage(text: string): number[] {
    this.planIndex = undefined;
    return [this.push({ kind: "user", text })];
  }

  addPermission(requestId: string, request: RequestPermissionRequest): number[] {
    const toolCallId = request.toolCall.toolCallId;
    const title = request.toolCall.title ?? (this.toolAt(toolCallId)?.title ?? toolCallId);
    const content = request.toolCall.content ?? this.toolAt(toolCallId)?.content ?? [];
    return [this.push({ kind: "permission", requestId, toolCallId, title, options: request.options, content })];
  }

  resolvePermission(requestId: string, outcome: string): number[] {
    const index = this.items.findIndex((i) => i.kind === "permission" && i.requestId === requestId);
    if (index < 0) return [];
    (this.items[index] as PermissionItem).outcome = outcome;
    return [index];
  }

  addStop(stopReason: StopReason): number[] {
    return [this.push({ kind: "stop", stopReason })];
  }

  addError(text: string): number[] {
    return [this.push({ kind: "error", text })];
  }

  toolAt(toolCallId: string): ToolItem | undefined {
    const index = this.toolIndex.get(toolCallId);
    return index === undefined ? undefined : (this.items[index] as ToolItem);
  }

  /** The reply text of the agent since the last user message. */
  lastAgentText(): string {
    let text = "";
    for (let i = this.items.length - 1; i >= 0; i--) {
      const item = this.items[i];
      if (item.kind === "user") break;
      if (item.kind === "agent") text = item.text + text;
    }
    return text;
  }

  private chunk(kind: ChunkItem["kind"], text: string, messageId: string | null | undefined): number[] {
    const last = this.items[this.items.length - 1];
    const id = messageId ?? undefined;
    if (last !== undefined && last.kind === kind && (id === undefined || last.messageId === undefined || last.messageId === id)) {
      last.text += text;
      if (id !== undefined) last.messageId = id;
      return [this.items.length - 1];
    }
    return [this.push({ kind, text, messageId: id })];
  }

  private push(item: TranscriptItem, toolCallId?: string): number {
    this.items.push(item);
    const index = this.items.length - 1;
    if (toolCallId !== undefined) this.toolIndex.set(toolCallId, index);
    return index;
  }
}
