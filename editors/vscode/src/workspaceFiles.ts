// The agent's file reads and writes, through the editor: reads see unsaved
// changes of open documents; writes to an open document become an edit of
// that document (then saved), so undo and dirty state behave as usual.

import * as vscode from "vscode";
import type { FileAccess } from "./controller.js";

function openDocument(path: string): vscode.TextDocument | undefined {
  return vscode.workspace.textDocuments.find((d) => d.uri.scheme === "file" && d.uri.fsPath === path);
}

export const workspaceFiles: FileAccess = {
  async readTextFile(path) {
    const doc = openDocument(path);
    if (doc !== undefined) return doc.getText();
    const bytes = await vscode.workspace.fs.readFile(vscode.Uri.file(path));
    return new TextDecoder("utf-8").decode(bytes);
  },

  async writeTextFile(path, content) {
    const doc = openDocument(path);
    if (doc !== undefined) {
      const edit = new vscode.WorkspaceEdit();
      const whole = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
      edit.replace(doc.uri, whole, content);
      if (!(await vscode.workspace.applyEdit(edit))) {
        throw new Error(`the editor refused the edit of ${path}`);
      }
      await doc.save();
      return;
    }
    const uri = vscode.Uri.file(path);
    await vscode.workspace.fs.createDirectory(vscode.Uri.joinPath(uri, ".."));
    await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode(content));
  },
};
