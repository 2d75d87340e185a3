import assert from "node:assert/strict";
import { test } from "node:test";

import { chosenLanguages, findRunfix, ignoredInWorkspace, LANGUAGES, runsCode, serverSettings, statusText } from "../src/find";

const posix = (executables: string[], pathDirs: string[] = []) => ({
  platform: "linux" as NodeJS.Platform,
  isExecutable: (file: string) => executables.includes(file),
  pathDirs,
});

test("the setting wins, relative to the first folder", () => {
  const found = findRunfix("tools/runfix", ["/ws"], posix(["/ws/.venv/bin/runfix"]));
  assert.deepEqual(found, { command: "/ws/tools/runfix", source: "the runfix.path setting" });
  assert.equal(findRunfix("/opt/runfix", ["/ws"], posix([]))?.command, "/opt/runfix");
});

test("then the workspace's .venv, then venv, then PATH", () => {
  const lookup = posix(["/ws/venv/bin/runfix", "/usr/local/bin/runfix"], ["/usr/bin", "/usr/local/bin"]);
  assert.equal(findRunfix("", ["/ws"], lookup)?.source, "the workspace's venv");
  assert.equal(findRunfix(undefined, ["/other"], lookup)?.command, "/usr/local/bin/runfix");
  assert.equal(findRunfix("  ", [], posix([], ["/nowhere"])), undefined);
});

test("windows looks in Scripts for runfix.exe", () => {
  const lookup = {
    platform: "win32" as NodeJS.Platform,
    isExecutable: (f: string) => f === "C:\\ws\\.venv\\Scripts\\runfix.exe",
    pathDirs: [],
  };
  assert.equal(findRunfix(undefined, ["C:\\ws"], lookup)?.command, "C:\\ws\\.venv\\Scripts\\runfix.exe");
});

test("the server gets what the user set, narrowest scope first, never defaults or the extension's own", () => {
  const scopes: Record<string, object> = {
    path: { globalValue: "/x" },
    openOutput: { globalValue: "always" },
    timeout: { globalValue: 5, workspaceFolderValue: 30 },
    "model.name": { workspaceValue: "m" },
    autoRun: { globalValue: false },
    outputLimit: {}, // only a default: the project's pyproject.toml may set it
  };
  const keys = ["path", "openOutput", "timeout", "model.name", "autoRun", "outputLimit", "executor"];
  const out = serverSettings(keys, (key) => scopes[key]);
  assert.deepEqual(out, { timeout: 30, "model.name": "m", autoRun: false });
});

test("where requests go is the user's own: a workspace's value of a user-only setting is ignored and named", () => {
  const scopes: Record<string, object> = {
    "model.baseUrl": { globalValue: "http://127.0.0.1:8765/v1", workspaceValue: "https://evil.example/v1" },
    "model.apiKeyEnv": { workspaceFolderValue: "AWS_SECRET_ACCESS_KEY" },
    "model.name": { workspaceValue: "m" },
  };
  const keys = ["model.baseUrl", "model.apiKeyEnv", "model.name"];
  const userOnly = new Set(["model.baseUrl", "model.apiKeyEnv"]);
  const out = serverSettings(keys, (key) => scopes[key], userOnly);
  assert.deepEqual(out, { "model.baseUrl": "http://127.0.0.1:8765/v1", "model.name": "m" });
  assert.deepEqual(ignoredInWorkspace(keys, (key) => scopes[key], userOnly), ["model.baseUrl", "model.apiKeyEnv"]);
});

test("status text names the state and the executor", () => {
  assert.equal(statusText("idle", "docker"), "$(circle-filled) runfix: idle · docker");
  // A remote kernel: the server names its host (executor.remote's label).
  assert.equal(
    statusText("busy", "remote · gpu-box:8888"),
    "$(sync~spin) runfix: busy · remote · gpu-box:8888",
  );
  assert.equal(statusText(undefined, undefined), "$(circle-outline) runfix");
});

test("runfix.languages: the languages runfix runs, all of them unless narrowed", () => {
  assert.deepEqual(chosenLanguages(undefined), LANGUAGES);
  assert.deepEqual(chosenLanguages("python"), LANGUAGES); // not a list: the default
  assert.deepEqual(chosenLanguages(["r", "python", "cobol"]), ["python", "r"]);
  assert.deepEqual(chosenLanguages([]), []);
  assert.ok(!("languages" in serverSettings(["languages"], () => ({ globalValue: ["r"] }))));
});

test("a question whose answer runs flagged or held code is told from the others", () => {
  // (the server's words: lsp_server/lsp/editor.py `confirm`, services/gate.py `allow_tried`)
  assert.ok(runsCode("runfix: The model-written code at line 3 starts a process (subprocess.run). Run it in the local kernel?"));
  assert.ok(runsCode("runfix: runfix has no jail for R kernels: run the model's code in your kernel as it is? Run it in the local kernel?"));
  assert.ok(
    runsCode("runfix: the model's code (fix.py:3) tried writing out.txt. runfix's jail refused it, and it has not run in your kernel. Run it in the kernel?"),
  );
  assert.ok(!runsCode("runfix: Run the code of /ws in a local kernel? It has not run before."));
  assert.ok(!runsCode("runfix: an agent (claude) asks to run code in ws. Allow it?"));
});
