import assert from "node:assert/strict";
import { test } from "node:test";

import {
  bundledWheel,
  choosePython,
  install,
  outsideFolders,
  ownInstall,
  parseVersion,
  recentEnough,
  type Run,
} from "../src/install";

test("the own install lives in the extension's storage", () => {
  assert.deepEqual(ownInstall("/s", "linux"), {
    venv: "/s/runfix-venv",
    python: "/s/runfix-venv/bin/python",
    runfix: "/s/runfix-venv/bin/runfix",
  });
  assert.equal(ownInstall("C:\\s", "win32").runfix, "C:\\s\\runfix-venv\\Scripts\\runfix.exe");
});

test("Python 3.10 or newer, read from what it printed", () => {
  assert.deepEqual(parseVersion("3.11\n"), [3, 11]);
  assert.equal(parseVersion("Python 3.11"), undefined);
  assert.ok(recentEnough([3, 10]) && recentEnough([4, 0]));
  assert.ok(!recentEnough([3, 9]) && !recentEnough(undefined));
});

test("the newest wheel the .vsix carries", () => {
  const names = ["runfix_lsp-0.9.0-py3-none-any.whl", "README", "runfix_lsp-0.10.1-py3-none-any.whl"];
  assert.equal(bundledWheel(names), "runfix_lsp-0.10.1-py3-none-any.whl");
  assert.equal(bundledWheel(["other-1.0-py3-none-any.whl"]), undefined);
});

test("the first Python that is recent enough; why the others were not", async () => {
  const versions: Record<string, string> = { old: "3.8\n", new: "3.12\n" };
  const run: Run = async (command) => {
    if (!(command in versions)) {
      throw new Error("spawn ENOENT");
    }
    return { code: 0, output: versions[command] };
  };
  const found = await choosePython(
    [
      { command: "missing", from: "the Python extension's interpreter" },
      { command: "old", from: "PATH" },
      { command: "new", from: "PATH" },
    ],
    run,
  );
  assert.equal(found.python?.command, "new");
  assert.equal(found.refused.length, 2);
  assert.match(found.refused[1], /old \(PATH\): Python 3\.8/);
  assert.equal((await choosePython([{ command: "old", from: "PATH" }], run)).python, undefined);
});

test("install: a venv, then the wheel into it; a failing step says which", async () => {
  const calls: string[][] = [];
  const said: string[] = [];
  const ok: Run = async (command, args, onLine) => {
    calls.push([command, ...args]);
    onLine?.("Collecting openai>=1.40");
    return { code: 0, output: "" };
  };
  const runfix = await install("python3", "/x/runfix_lsp-0.1.0-py3-none-any.whl", "/s", "linux", ok, (m) => said.push(m));
  assert.equal(runfix, "/s/runfix-venv/bin/runfix");
  assert.deepEqual(calls[0], ["python3", "-m", "venv", "--clear", "/s/runfix-venv"]);
  assert.equal(calls[1][0], "/s/runfix-venv/bin/python");
  assert.ok(calls[1].includes("/x/runfix_lsp-0.1.0-py3-none-any.whl"));
  assert.ok(said.includes("Collecting openai>=1.40"));
  const noVenv: Run = async () => ({ code: 1, output: "ensurepip is not available" });
  await assert.rejects(install("python3", "w.whl", "/s", "linux", noVenv, () => {}), /python3-venv.*ensurepip/);
});

test("a workspace's own interpreter never makes runfix's environment", () => {
  assert.ok(!outsideFolders("/ws/.venv/bin/python", ["/other", "/ws"], "linux"));
  assert.ok(outsideFolders("/usr/bin/python3", ["/ws"], "linux"));
  assert.ok(outsideFolders("/ws2/bin/python", ["/ws"], "linux")); // a sibling, not inside
  assert.ok(!outsideFolders("C:\\ws\\.venv\\Scripts\\python.exe", ["C:\\ws"], "win32"));
});
