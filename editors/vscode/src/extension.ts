// Entry point: wires the controller (plain modules) to VS Code: settings,
// commands, the chat view, the diff documents and the quick-pick fallback
// for approvals.

import * as vscode from "vscode";
import { AgentError, messageOf } from "./agent.js";
import { ChatViewProvider } from "./chatView.js";
import { DEFAULT_SETTINGS, launchSpec, type PincerSettings } from "./config.js";
import { ChatController } from "./controller.js";
import { DIFF_SCHEME, DiffContentProvider } from "./diffProvider.js";
import { optionLabel, orderedOptions, type PendingPermission } from "./permissions.js";
import { workspaceFiles } from "./workspaceFiles.js";

function readSettings(): PincerSettings {
  const c = vscode.workspace.getConfiguration("pincer");
  return {
    path: c.get<string>("path", DEFAULT_SETTINGS.path),
    args: c.get<string[]>("args", DEFAULT_SETTINGS.args),
    env: c.get<Record<string, string>>("env", DEFAULT_SETTINGS.env),
    mode: c.get<string>("mode", DEFAULT_SETTINGS.mode),
    model: c.get<string>("model", DEFAULT_SETTINGS.model),
  };
}

function workspaceFolder(): string | undefined {
  const active = vscode.window.activeTextEditor?.document.uri;
  const folder = (active && vscode.workspace.getWorkspaceFolder(active)) ?? vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.scheme === "file" ? folder.uri.fsPath : undefined;
}

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel("Pincer");
  const diffs = new DiffContentProvider();
  const controller = new ChatController({
    launch: () => {
      const spec = launchSpec(readSettings(), workspaceFolder());
      log.appendLine(`starting ${spec.command} ${spec.args.join(" ")}`);
      return spec;
    },
    settings: readSettings,
    cwd: () => {
      const folder = workspaceFolder();
      if (folder === undefined) throw new AgentError("open a folder first: Pincer works in a workspace folder");
      return folder;
    },
    files: workspaceFiles,
    log: (line) => log.appendLine(line),
  });
  const chat = new ChatViewProvider(context.extensionUri, controller, diffs);

  // Approvals show as buttons in the chat; when the chat is hidden they also
  // come up as a quick pick. Whichever is answered first wins.
  const quickPicks = new Map<string, vscode.CancellationTokenSource>();
  controller.onEvent((event) => {
    if (event.type === "permission" && !chat.visible) void askWithQuickPick(event.pending);
    if (event.type === "permissionSettled") quickPicks.get(event.id)?.cancel();
    if (event.type === "state") void vscode.commands.executeCommand("setContext", "pincer.busy", event.state.busy);
  });
  async function askWithQuickPick(pending: PendingPermission): Promise<void> {
    const source = new vscode.CancellationTokenSource();
    quickPicks.set(pending.id, source);
    try {
      const tool = pending.request.toolCall;
      const items = orderedOptions(pending.request.options).map((o) => ({ label: optionLabel(o), optionId: o.optionId }));
      const picked = await vscode.window.showQuickPick(
        items,
        { title: `Pincer asks: ${tool.title ?? tool.toolCallId}`, placeHolder: "Allow this tool call?", ignoreFocusOut: true },
        source.token,
      );
      // Dismissing the pick leaves the question open in the chat.
      if (picked !== undefined) controller.permissions.answer(pending.id, picked.optionId);
    } finally {
      quickPicks.delete(pending.id);
      source.dispose();
    }
  }

  const run = (f: () => Promise<unknown>) => async () => {
    try {
      await f();
    } catch (e) {
      void vscode.window.showErrorMessage(messageOf(e));
    }
  };

  context.subscriptions.push(
    log,
    vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, diffs),
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, chat, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.commands.registerCommand(
      "pincer.newSession",
      run(async () => {
        await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
        await controller.newSession();
      }),
    ),
    vscode.commands.registerCommand(
      "pincer.sessions",
      run(async () => {
        const sessions = await controller.listSessions();
        if (sessions.length === 0) {
          void vscode.window.showInformationMessage("Pincer has no stored sessions yet");
          return;
        }
        const picked = await vscode.window.showQuickPick(
          sessions.map((s) => ({
            label: s.title || s.sessionId,
            description: s.updatedAt ? new Date(s.updatedAt).toLocaleString() : undefined,
            detail: s.cwd,
            session: s,
          })),
          { title: "Pincer sessions", placeHolder: "Open a session", matchOnDetail: true },
        );
        if (picked === undefined) return;
        await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
        await controller.loadSession(picked.session);
      }),
    ),
    vscode.commands.registerCommand("pincer.cancel", run(() => controller.cancel())),
    vscode.commands.registerCommand("pincer.showLog", () => log.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (["pincer.path", "pincer.args", "pincer.env"].some((s) => e.affectsConfiguration(s))) {
        // The next prompt starts the agent with the new settings.
        void controller.stopAgent();
      }
    }),
    { dispose: () => void controller.dispose() },
  );
}

export function deactivate(): void {
  // The controller is disposed with the subscriptions.
}
