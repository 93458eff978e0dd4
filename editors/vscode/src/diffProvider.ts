// "Show diff" for a proposed or made edit: the old and new texts become
// read-only virtual documents opened side by side with `vscode.diff`.

import * as path from "node:path";
import * as vscode from "vscode";
import type { Diff } from "./session.js";

export const DIFF_SCHEME = "pincer-diff";

export class DiffContentProvider implements vscode.TextDocumentContentProvider {
  /** Texts by key (the URI query); kept for the extension's lifetime, they are small. */
  private readonly texts = new Map<string, string>();
  private next = 1;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.query) ?? "";
  }

  async show(diff: Diff): Promise<void> {
    const key = this.next++;
    // The file's own path keeps its language (highlighting) in the diff.
    const left = this.register(diff.path, `${key}-old`, diff.oldText ?? "");
    const right = this.register(diff.path, `${key}-new`, diff.newText);
    const name = path.basename(diff.path);
    const title = diff.oldText == null ? `${name} (new file, Pincer)` : `${name} (Pincer's edit)`;
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: true });
  }

  private register(file: string, query: string, text: string): vscode.Uri {
    this.texts.set(query, text);
    return vscode.Uri.from({ scheme: DIFF_SCHEME, path: file, query });
  }
}
