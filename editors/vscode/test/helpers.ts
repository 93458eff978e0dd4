import { mkdtempSync, realpathSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { launchSpec, type PincerSettings } from "../src/config.js";
import { ChatController, type ChatEvent, type FileAccess } from "../src/controller.js";
import { nodeFiles } from "../src/nodeFiles.js";

const here = path.dirname(fileURLToPath(import.meta.url));
/** `editors/vscode`, from `out/test`. */
export const packageRoot = path.resolve(here, "../..");
export const fakeAgentScript = path.join(here, "fakeAgent.js");

export function tempDir(prefix: string): string {
  return realpathSync(mkdtempSync(path.join(os.tmpdir(), prefix)));
}

export type Harness = {
  controller: ChatController;
  events: ChatEvent[];
  workspace: string;
  writes: { path: string; content: string }[];
  reads: string[];
};

/** A controller over the given settings, recording its events and the agent's file access. */
export function harness(
  settings: Partial<PincerSettings>,
  workspace = tempDir("pincer-ws-"),
  /** Unsaved editor buffers by path: reads see these instead of the disk. */
  buffers: Record<string, string> = {},
): Harness {
  const events: ChatEvent[] = [];
  const writes: { path: string; content: string }[] = [];
  const reads: string[] = [];
  const files: FileAccess = {
    readTextFile: (p) => {
      reads.push(p);
      return p in buffers ? Promise.resolve(buffers[p]) : nodeFiles.readTextFile(p);
    },
    writeTextFile: (p, content) => {
      writes.push({ path: p, content });
      return nodeFiles.writeTextFile(p, content);
    },
  };
  const controller = new ChatController({
    launch: () => launchSpec(settings, workspace),
    settings: () => ({ mode: settings.mode ?? "", model: settings.model ?? "" }),
    cwd: () => workspace,
    files,
  });
  controller.onEvent((e) => events.push(e));
  return { controller, events, workspace, writes, reads };
}

/** Settings that launch the fake agent with `node`. */
export function fakeSettings(extraArgs: string[] = []): Partial<PincerSettings> {
  return { path: process.execPath, args: [fakeAgentScript, ...extraArgs] };
}
