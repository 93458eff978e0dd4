// Turning `session/request_permission` into a choice. The broker keeps each
// open question under an id the chat view answers with; whoever answers
// first (the chat buttons, the quick-pick fallback, a cancel, the agent
// withdrawing its request) settles it, and later answers are ignored.

import type { PermissionOption, RequestPermissionRequest, RequestPermissionResponse } from "@agentclientprotocol/sdk";

/** The response for a chosen option; `undefined` means the user dismissed the question. */
export function outcomeFor(request: RequestPermissionRequest, optionId: string | undefined): RequestPermissionResponse {
  if (optionId === undefined) {
    return { outcome: { outcome: "cancelled" } };
  }
  if (!request.options.some((o) => o.optionId === optionId)) {
    const offered = request.options.map((o) => o.optionId).join(", ");
    throw new Error(`option \`${optionId}\` was not offered (offered: ${offered})`);
  }
  return { outcome: { outcome: "selected", optionId } };
}

/** A label for a button or quick-pick entry: the agent's name plus what kind of answer it is. */
export function optionLabel(option: PermissionOption): string {
  return option.name || option.optionId;
}

/** Allow options first, then rejections, keeping the agent's order within each. */
export function orderedOptions(options: PermissionOption[]): PermissionOption[] {
  const rank = (o: PermissionOption) => (o.kind.startsWith("allow") ? 0 : 1);
  return [...options].sort((a, b) => rank(a) - rank(b));
}

export type PendingPermission = {
  id: string;
  request: RequestPermissionRequest;
};

export type PermissionListener = {
  /** A new question is open. */
  asked(pending: PendingPermission): void;
  /** The question was settled; `outcome` is the option id or `cancelled`. */
  settled(id: string, outcome: string): void;
};

export class PermissionBroker {
  private nextId = 1;
  private readonly pending = new Map<
    string,
    { request: RequestPermissionRequest; resolve: (r: RequestPermissionResponse) => void }
  >();

  constructor(private readonly listener: PermissionListener) {}

  /**
   * Opens a question and waits for its answer. `signal` is the request's own
   * signal: it aborts when the agent withdraws the request (`$/cancel_request`)
   * or the connection closes.
   */
  ask(request: RequestPermissionRequest, signal?: AbortSignal): Promise<RequestPermissionResponse> {
    const id = `perm-${this.nextId++}`;
    return new Promise((resolve) => {
      this.pending.set(id, { request, resolve });
      if (signal !== undefined) {
        if (signal.aborted) {
          queueMicrotask(() => this.settle(id, undefined));
        } else {
          signal.addEventListener("abort", () => this.settle(id, undefined), { once: true });
        }
      }
      this.listener.asked({ id, request });
    });
  }

  /** Answers a question; false when it is no longer open. Throws for an option that was not offered. */
  answer(id: string, optionId: string): boolean {
    const entry = this.pending.get(id);
    if (entry === undefined) return false;
    outcomeFor(entry.request, optionId);
    return this.settle(id, optionId);
  }

  /** Dismisses a question (the `cancelled` outcome). */
  dismiss(id: string): boolean {
    return this.settle(id, undefined);
  }

  /** Dismisses every open question, of one session or of all. */
  cancelAll(sessionId?: string): void {
    for (const [id, entry] of [...this.pending]) {
      if (sessionId === undefined || entry.request.sessionId === sessionId) {
        this.settle(id, undefined);
      }
    }
  }

  isOpen(id: string): boolean {
    return this.pending.has(id);
  }

  openIds(): string[] {
    return [...this.pending.keys()];
  }

  private settle(id: string, optionId: string | undefined): boolean {
    const entry = this.pending.get(id);
    if (entry === undefined) return false;
    this.pending.delete(id);
    entry.resolve(outcomeFor(entry.request, optionId));
    this.listener.settled(id, optionId ?? "cancelled");
    return true;
  }
}
