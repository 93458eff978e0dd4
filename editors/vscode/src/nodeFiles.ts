// File access straight on the disk: what the tests use in place of the
// editor's workspace.

import { mkdir, readFile, writeFile } from "node:fs/promises";
import * as path from "node:path";
import type { FileAccess } from "./controller.js";

export const nodeFiles: FileAccess = {
  readTextFile: (file) => readFile(file, "utf8"),
  async writeTextFile(file, content) {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content, "utf8");
  },
};
