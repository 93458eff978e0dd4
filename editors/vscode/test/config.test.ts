import { test } from "node:test";
import assert from "node:assert/strict";
import * as os from "node:os";
import { launchSpec, sliceLines } from "../src/config.js";

test("the default launch is `pincer acp` with the editor's environment", () => {
  const spec = launchSpec({}, "/w", { PATH: "/bin", HOME: "/h" });
  assert.deepEqual(spec, { command: "pincer", args: ["acp"], env: { PATH: "/bin", HOME: "/h" }, cwd: "/w" });
});

test("pincer.env overrides the environment; ~ and workspace-relative paths resolve", () => {
  const spec = launchSpec({ path: "~/bin/pincer", env: { PINCER_MODE: "full", HOME: "/x" } }, "/w", { HOME: "/h" });
  assert.equal(spec.command, `${os.homedir()}/bin/pincer`);
  assert.deepEqual(spec.env, { HOME: "/x", PINCER_MODE: "full" });
  assert.equal(launchSpec({ path: "./target/debug/pincer" }, "/w").command, "/w/target/debug/pincer");
  assert.equal(launchSpec({ path: "  " }, "/w").command, "pincer");
});

test("sliceLines takes 1-based line ranges", () => {
  const text = "one\ntwo\nthree\nfour";
  assert.equal(sliceLines(text), text);
  assert.equal(sliceLines(text, 2, 2), "two\nthree");
  assert.equal(sliceLines(text, 3), "three\nfour");
  assert.equal(sliceLines(text, null, 1), "one");
  assert.equal(sliceLines(text, 9, 1), "");
});
