// The chat webview: renders the controller's events (media/chat.js does the
// DOM work) and turns the view's clicks into controller calls.

import * as vscode from "vscode";
import type { ChatController, ChatEvent } from "./controller.js";
import type { DiffContentProvider } from "./diffProvider.js";
import { messageOf } from "./agent.js";
import { diffsOf } from "./session.js";

type FromView =
  | { type: "ready" }
  | { type: "prompt"; text: string }
  | { type: "cancel" }
  | { type: "permission"; id: string; optionId: string }
  | { type: "showDiff"; index: number; diff: number }
  | { type: "setMode"; modeId: string }
  | { type: "command"; command: string };

export class ChatViewProvider implements vscode.WebviewViewProvider {
  static readonly viewId = "pincer.chat";
  private view: vscode.WebviewView | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly controller: ChatController,
    private readonly diffs: DiffContentProvider,
  ) {
    controller.onEvent((event) => this.post(event));
  }

  /** Whether a person can see the chat (else approvals also go to a quick pick). */
  get visible(): boolean {
    return this.view?.visible === true;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = this.html(view.webview, media);
    view.webview.onDidReceiveMessage((m: FromView) => void this.handle(m));
    view.onDidDispose(() => {
      if (this.view === view) this.view = undefined;
    });
  }

  private async handle(message: FromView): Promise<void> {
    try {
      switch (message.type) {
        case "ready":
          this.post({ type: "reset", items: this.controller.transcript.items });
          this.post({ type: "state", state: this.controller.state });
          break;
        case "prompt":
          await this.controller.prompt(message.text);
          break;
        case "cancel":
          await this.controller.cancel();
          break;
        case "permission":
          this.controller.permissions.answer(message.id, message.optionId);
          break;
        case "showDiff": {
          const item = this.controller.transcript.items[message.index];
          if (item?.kind !== "tool" && item?.kind !== "permission") return;
          const diff = diffsOf(item.content)[message.diff];
          if (diff !== undefined) await this.diffs.show(diff);
          break;
        }
        case "setMode":
          await this.controller.setMode(message.modeId);
          break;
        case "command":
          if (["pincer.newSession", "pincer.sessions", "pincer.cancel", "pincer.showLog"].includes(message.command)) {
            await vscode.commands.executeCommand(message.command);
          }
          break;
      }
    } catch (e) {
      // The transcript already shows prompt failures; other failures need a word.
      if (message.type !== "prompt") void vscode.window.showErrorMessage(messageOf(e));
    }
  }

  private post(event: ChatEvent): void {
    void this.view?.webview.postMessage(event);
  }

  private html(webview: vscode.Webview, media: vscode.Uri): string {
    const nonce = Array.from({ length: 32 }, () => Math.floor(Math.random() * 36).toString(36)).join("");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, "chat.css"));
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${webview.cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link href="${style}" rel="stylesheet">
<title>Pincer</title>
</head>
<body>
<header id="bar">
  <span id="title">New session</span>
  <select id="mode" title="Mode" hidden></select>
</header>
<main id="transcript" aria-live="polite"></main>
<footer>
  <textarea id="prompt" rows="3" placeholder="Ask Pincer (Enter to send, Shift+Enter for a new line)"></textarea>
  <div id="actions">
    <span id="usage"></span>
    <button id="stop" hidden>Stop</button>
    <button id="send">Send</button>
  </div>
</footer>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}
