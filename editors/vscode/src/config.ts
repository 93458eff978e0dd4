// How the extension's settings become a process launch. The integration test
// launches the real binary through this same function, so what CI checks is
// what the extension runs.

import * as os from "node:os";
import * as path from "node:path";

export type PincerSettings = {
  /** `pincer.path`: the binary; a bare name is looked up on PATH. */
  path: string;
  /** `pincer.args`: arguments, `["acp"]` by default. */
  args: string[];
  /** `pincer.env`: extra environment variables for the process. */
  env: Record<string, string>;
  /** `pincer.mode`: the session mode to set after `session/new`; empty keeps Pincer's default. */
  mode: string;
  /** `pincer.model`: the model (`provider/model`) to set after `session/new`; empty keeps Pincer's default. */
  model: string;
};

export const DEFAULT_SETTINGS: PincerSettings = {
  path: "pincer",
  args: ["acp"],
  env: {},
  mode: "",
  model: "",
};

export type LaunchSpec = {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** The working directory of the process: the workspace folder when there is one. */
  cwd: string | undefined;
};

/**
 * Resolves settings into a launch. `~/` is expanded; a relative path with a
 * slash is taken from the workspace folder; a bare name is left to PATH.
 */
export function launchSpec(
  settings: Partial<PincerSettings>,
  workspaceFolder: string | undefined,
  baseEnv: NodeJS.ProcessEnv = process.env,
): LaunchSpec {
  const merged = { ...DEFAULT_SETTINGS, ...settings };
  let command = merged.path.trim() || DEFAULT_SETTINGS.path;
  if (command === "~" || command.startsWith("~/")) {
    command = path.join(os.homedir(), command.slice(1));
  } else if (!path.isAbsolute(command) && command.includes("/") && workspaceFolder !== undefined) {
    command = path.resolve(workspaceFolder, command);
  }
  return {
    command,
    args: [...merged.args],
    env: { ...baseEnv, ...merged.env },
    cwd: workspaceFolder,
  };
}

/** Lines `line` (1-based) .. `line + limit - 1` of a text, as `fs/read_text_file` asks. */
export function sliceLines(text: string, line?: number | null, limit?: number | null): string {
  if ((line == null || line <= 1) && limit == null) return text;
  const lines = text.split("\n");
  const start = Math.max(0, (line ?? 1) - 1);
  const end = limit == null ? lines.length : start + Math.max(0, limit);
  return lines.slice(start, end).join("\n");
}
