import assert from "node:assert/strict";
import { test } from "node:test";

import {
  bundledWheel,
  choosePython,
  install,
  installedVersion,
  marker,
  onPath,
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
    marker: "/s/runfix-venv.installed",
    config: "/s/runfix-venv/pyvenv.cfg",
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
  // Isolated (-I): a folder's venv.py or pip.py is never what runs.
  assert.deepEqual(calls[0], ["python3", "-I", "-m", "venv", "--clear", "/s/runfix-venv"]);
  assert.deepEqual(calls[1].slice(0, 4), ["/s/runfix-venv/bin/python", "-I", "-m", "pip"]);
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

test("the marker beside the environment says the version only for the environment it was written for", () => {
  const environment = { ino: 7, mtimeMs: 1700000000123.5 };
  const text = marker("0.2.0", environment);
  assert.equal(installedVersion(text, environment), "0.2.0");
  // Made again (venv --clear, by hand, or an install that did not finish): update.
  assert.equal(installedVersion(text, { ino: 8, mtimeMs: environment.mtimeMs }), undefined);
  assert.equal(installedVersion(text, { ino: 7, mtimeMs: 1 }), undefined);
  assert.equal(installedVersion(text, undefined), undefined);
  assert.equal(installedVersion(undefined, environment), undefined);
  assert.equal(installedVersion("{not json", environment), undefined);
  assert.equal(installedVersion(JSON.stringify({ ino: 7, mtimeMs: environment.mtimeMs }), environment), undefined);
});

test("PATH's python3 by absolute path; relative entries name the current folder and are skipped", () => {
  const present = new Set(["/ws/.venv/bin/python3", "/usr/bin/python3", "python3", "bin/python3"]);
  const found = onPath(["python3"], ["", ".", "bin", "/ws/.venv/bin", "/usr/bin", "/usr/bin"], (f) => present.has(f), "linux");
  assert.deepEqual(found, ["/ws/.venv/bin/python3", "/usr/bin/python3"]);
  // The workspace's own is then refused by outsideFolders (in the extension).
  assert.deepEqual(found.filter((f) => outsideFolders(f, ["/ws"], "linux")), ["/usr/bin/python3"]);
});

test("the version check runs isolated too", async () => {
  const calls: string[][] = [];
  const run: Run = async (command, args) => {
    calls.push([command, ...args]);
    return { code: 0, output: "3.11\n" };
  };
  await choosePython([{ command: "/usr/bin/python3", from: "PATH" }], run);
  assert.deepEqual(calls[0].slice(0, 3), ["/usr/bin/python3", "-I", "-c"]);
});
