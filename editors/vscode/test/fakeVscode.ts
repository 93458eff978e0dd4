// Just enough of the `vscode` API to activate the bundled extension in Node:
// records what the extension registers, shows and opens, and serves the
// workspace from the disk.

import { mkdir, readFile, writeFile } from "node:fs/promises";
import * as path from "node:path";

type Disposable = { dispose(): void };
const disposable: Disposable = { dispose() {} };

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    readonly query: string,
  ) {}
  static file(p: string): Uri {
    return new Uri("file", p, "");
  }
  static from(c: { scheme: string; path?: string; query?: string }): Uri {
    return new Uri(c.scheme, c.path ?? "", c.query ?? "");
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, path.join(base.path, ...parts), "");
  }
  get fsPath(): string {
    return this.path;
  }
  toString(): string {
    return `${this.scheme}://${this.path}${this.query ? `?${this.query}` : ""}`;
  }
}

export class CancellationTokenSource {
  private listeners: (() => void)[] = [];
  readonly token = {
    isCancellationRequested: false,
    onCancellationRequested: (f: () => void) => {
      this.listeners.push(f);
      return disposable;
    },
  };
  cancel(): void {
    this.token.isCancellationRequested = true;
    for (const f of this.listeners) f();
  }
  dispose(): void {}
}

export type QuickPickCall = { items: { label: string }[]; options: { title?: string }; token?: CancellationTokenSource["token"] };

export function createFakeVscode(workspace: string, config: Record<string, unknown>) {
  const record = {
    commands: new Map<string, (...args: unknown[]) => unknown>(),
    executed: [] as { id: string; args: unknown[] }[],
    views: new Map<string, { resolveWebviewView(view: unknown): void }>(),
    contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): string }>(),
    errors: [] as string[],
    infos: [] as string[],
    log: [] as string[],
    quickPicks: [] as QuickPickCall[],
    /** What the next quick pick answers: the label to pick, or undefined to dismiss. */
    pickLabel: undefined as string | undefined,
  };
  const vscode = {
    Uri,
    CancellationTokenSource,
    window: {
      activeTextEditor: undefined,
      createOutputChannel: () => ({ appendLine: (l: string) => record.log.push(l), show() {}, dispose() {} }),
      registerWebviewViewProvider: (id: string, provider: { resolveWebviewView(view: unknown): void }) => {
        record.views.set(id, provider);
        return disposable;
      },
      showErrorMessage: async (m: string) => void record.errors.push(m),
      showInformationMessage: async (m: string) => void record.infos.push(m),
      showQuickPick: async <T extends { label: string }>(items: T[], options: { title?: string }, token?: QuickPickCall["token"]) => {
        record.quickPicks.push({ items, options, token });
        return items.find((i) => i.label === record.pickLabel);
      },
    },
    workspace: {
      workspaceFolders: [{ uri: Uri.file(workspace) }],
      textDocuments: [],
      getWorkspaceFolder: () => undefined,
      getConfiguration: (section: string) => ({ get: (key: string, fallback: unknown) => config[`${section}.${key}`] ?? fallback }),
      onDidChangeConfiguration: () => disposable,
      registerTextDocumentContentProvider: (scheme: string, provider: { provideTextDocumentContent(uri: Uri): string }) => {
        record.contentProviders.set(scheme, provider);
        return disposable;
      },
      fs: {
        readFile: (u: Uri) => readFile(u.fsPath),
        writeFile: (u: Uri, bytes: Uint8Array) => writeFile(u.fsPath, bytes),
        createDirectory: (u: Uri) => mkdir(u.fsPath, { recursive: true }),
      },
    },
    commands: {
      registerCommand: (id: string, f: (...args: unknown[]) => unknown) => {
        record.commands.set(id, f);
        return disposable;
      },
      executeCommand: async (id: string, ...args: unknown[]) => {
        record.executed.push({ id, args });
        return record.commands.get(id)?.(...args);
      },
    },
  };
  return { vscode, record };
}

/** A webview view as the extension sees it; `messages` holds what the extension posted. */
export function fakeWebviewView(visible = true) {
  let receive: ((m: unknown) => void) | undefined;
  const messages: any[] = [];
  const view = {
    visible,
    onDidDispose: () => disposable,
    webview: {
      options: {},
      html: "",
      cspSource: "vscode-webview:",
      asWebviewUri: (u: Uri) => u,
      onDidReceiveMessage: (f: (m: unknown) => void) => {
        receive = f;
        return disposable;
      },
      postMessage: async (m: unknown) => {
        messages.push(structuredClone(m));
        return true;
      },
    },
  };
  return {
    view,
    messages,
    /** A message from the view's script to the extension. */
    send: (m: unknown) => receive?.(m),
  };
}
