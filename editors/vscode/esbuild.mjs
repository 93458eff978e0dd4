// Bundles the extension (and the ACP SDK, which is ESM only) into one
// CommonJS file, the form VS Code's extension host loads.
import { build } from "esbuild";

await build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node18",
  external: ["vscode"],
  outfile: "dist/extension.cjs",
  sourcemap: true,
  logLevel: "warning",
});
