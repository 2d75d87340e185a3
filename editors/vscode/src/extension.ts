// runfix for VS Code: a thin client. It starts `runfix serve` over stdio for the files of the
// languages runfix runs (runfix.languages: Python and the languages of Jupyter kernels),
// forwards the runfix.* settings, adds palette commands that call the server's commands,
// and shows the kernel's state in the status bar. The server does the work.
import { spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import {
  type ClientCapabilities,
  ExecuteCommandRequest,
  type FeatureState,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
  type StaticFeature,
} from "vscode-languageclient/node";

import {
  chosenLanguages,
  findRunfix,
  type KernelState,
  NOT_FOUND,
  ignoredInWorkspace,
  runsCode,
  serverSettings,
  statusText,
} from "./find";
import {
  bundledWheel,
  choosePython,
  install,
  installedVersion,
  type Made,
  marker,
  onPath,
  outsideFolders,
  ownInstall,
  type Run,
} from "./install";
import { notebookController, type RunfixKernel } from "./notebooks";
import { type OutputsAnswer, OutputViews } from "./outputView";

let client: LanguageClient | undefined;
/** The runfix command the server was started with: `runfix dap` is its debug adapter. */
let runfixCommand: string | undefined;
/** The runfix.path setting the server was started with. */
let startedPath: string | undefined;
let output: vscode.LogOutputChannel | undefined;
let statusItem: vscode.StatusBarItem | undefined;
let views: OutputViews | undefined;
let notebookKernel: RunfixKernel | undefined;
const states = new Map<string, { state: KernelState; executor: string }>();
/** The language ids runfix runs here (runfix.languages, read at activation). */
let languages: string[] = chosenLanguages(undefined);

const UNTRUSTED =
  "runfix runs the code in your files: it starts only in a trusted workspace " +
  "(Workspaces: Manage Workspace Trust).";

/** The runfix.* settings this extension declares, without the prefix. */
function settingKeys(context: vscode.ExtensionContext): string[] {
  const declared = (context.extension.packageJSON as { contributes?: { configuration?: { properties?: object } } })
    .contributes?.configuration?.properties;
  return Object.keys(declared ?? {})
    .filter((key) => key.startsWith("runfix."))
    .map((key) => key.slice("runfix.".length));
}

/** The runfix.* settings only the user's own settings may set (scope machine or application:
 * where model requests go, which key is sent, the remote server), without the prefix. */
function userOnlyKeys(context: vscode.ExtensionContext): Set<string> {
  const declared = (context.extension.packageJSON as {
    contributes?: { configuration?: { properties?: Record<string, { scope?: string }> } };
  }).contributes?.configuration?.properties;
  return new Set(
    Object.entries(declared ?? {})
      .filter(([key, spec]) => key.startsWith("runfix.") && ["machine", "application"].includes(spec.scope ?? ""))
      .map(([key]) => key.slice("runfix.".length)),
  );
}

let userOnly: Set<string> = new Set();
const saidIgnored = new Set<string>();

/** What the user set for the server, for a folder (or the workspace); a workspace's value of
 * a user-only setting is ignored, and said once. */
function settings(keys: string[], scope?: vscode.Uri): Record<string, unknown> {
  const section = vscode.workspace.getConfiguration("runfix", scope);
  const inspect = (key: string) => section.inspect(key);
  const ignored = ignoredInWorkspace(keys, inspect, userOnly).filter((key) => !saidIgnored.has(key));
  if (ignored.length > 0) {
    ignored.forEach((key) => saidIgnored.add(key));
    const named = ignored.map((key) => `runfix.${key}`).join(", ");
    void vscode.window.showWarningMessage(
      `runfix: ${named} in this workspace's settings is ignored: where model requests go and ` +
        "which key is sent are yours to set, in your User settings.",
    );
  }
  return serverSettings(keys, inspect, userOnly);
}

function folders(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * A process run for the installer, in `cwd` (the extension's storage, never a workspace
 * folder): its exit code and output, each line to the log too.
 */
const runIn =
  (cwd: string): Run =>
  (command, args, onLine) =>
    new Promise((resolve, reject) => {
      const child = spawn(command, args, { env: process.env, cwd });
      let output = "";
      let partial = "";
      const take = (chunk: Buffer): void => {
        const text = partial + chunk.toString();
        const lines = text.split("\n");
        partial = lines.pop() ?? "";
        for (const line of lines) {
          output += line + "\n";
          if (output.length > 200_000) {
            output = output.slice(-100_000);
          }
          outputChannel()?.appendLine(line);
          onLine?.(line);
        }
      };
      child.stdout.on("data", take);
      child.stderr.on("data", take);
      child.on("error", reject);
      child.on("close", (code) => resolve({ code: code ?? 1, output: output + partial }));
    });

function outputChannel(): vscode.LogOutputChannel | undefined {
  return output;
}

/** (globalState, before the marker file) the extension version the own environment holds. */
const INSTALLED_FOR = "runfix.installedFor";

function made(file: string): Made | undefined {
  try {
    const { ino, mtimeMs } = fs.statSync(file);
    return { ino, mtimeMs };
  } catch {
    return undefined;
  }
}

/** The extension version runfix's own environment holds, by the marker file beside it. */
function ownVersion(context: vscode.ExtensionContext): string | undefined {
  const own = ownInstall(context.globalStorageUri.fsPath, process.platform);
  let text: string | undefined;
  try {
    text = fs.readFileSync(own.marker, "utf8");
  } catch {
    // An install from before the marker file: globalState said it, if it was kept.
    const version = context.globalState.get<string>(INSTALLED_FOR);
    const environment = made(own.config);
    if (version !== undefined && environment !== undefined) {
      fs.writeFileSync(own.marker, marker(version, environment));
    }
    return version;
  }
  return installedVersion(text, made(own.config));
}

/** The Pythons to make runfix's environment with: the Python extension's, then python3. */
async function pythonCandidates(): Promise<{ command: string; from: string }[]> {
  const out: { command: string; from: string }[] = [];
  // Both spellings of each workspace folder (a folder or a .venv reached through a link).
  const spelled = folders().flatMap((f) => [f, fs.existsSync(f) ? fs.realpathSync(f) : f]);
  const outside = (p: string): boolean =>
    outsideFolders(p, spelled, process.platform) &&
    outsideFolders(fs.existsSync(p) ? fs.realpathSync(p) : p, spelled, process.platform);
  try {
    const python = vscode.extensions.getExtension("ms-python.python");
    if (python) {
      const api = (await python.activate()) as {
        environments?: {
          getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
          resolveEnvironment(p: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
        };
      };
      const environments = api?.environments;
      const active = environments?.getActiveEnvironmentPath(vscode.workspace.workspaceFolders?.[0]?.uri);
      const resolved = active && (await environments?.resolveEnvironment(active));
      const executable = resolved?.executable.uri?.fsPath;
      if (executable && outside(executable)) {
        out.push({ command: executable, from: "the Python extension's interpreter" });
      } else if (executable) {
        output?.appendLine(
          `runfix: not installing with ${executable}: it is the workspace's own, and runfix's environment serves every workspace`,
        );
      }
    }
  } catch (err) {
    output?.appendLine(`runfix: the Python extension did not say its interpreter: ${String(err)}`);
  }
  // PATH's, by absolute path, and not one a workspace folder ships (a PATH that puts the
  // folder's .venv/bin first would otherwise choose it).
  const names = process.platform === "win32" ? ["python", "py"] : ["python3"];
  const dirs = (process.env.PATH ?? "").split(process.platform === "win32" ? ";" : ":");
  for (const command of onPath(names, dirs, isExecutable, process.platform)) {
    if (outside(command)) {
      out.push({ command, from: "PATH" });
    } else {
      output?.appendLine(`runfix: not installing with ${command} (on PATH): it is in a workspace folder`);
    }
  }
  return out;
}

/**
 * Make runfix's own environment (global storage) with a Python 3.10+ found here and install
 * the wheel this extension carries; its `runfix`, or undefined (said why).
 */
async function installOwn(context: vscode.ExtensionContext, why: string): Promise<string | undefined> {
  if (!vscode.workspace.isTrusted) {
    // Installing runs interpreters found here: not before the workspace is trusted.
    void vscode.window.showWarningMessage(UNTRUSTED);
    return undefined;
  }
  const serverDir = context.asAbsolutePath("server");
  const wheel = bundledWheel(fs.existsSync(serverDir) ? fs.readdirSync(serverDir) : []);
  if (!wheel) {
    void vscode.window.showErrorMessage("runfix: this build of the extension carries no runfix wheel to install.");
    return undefined;
  }
  const storage = context.globalStorageUri.fsPath;
  fs.mkdirSync(storage, { recursive: true });
  const runProcess = runIn(storage);
  const { python, refused } = await choosePython(await pythonCandidates(), runProcess);
  if (!python) {
    const tried = refused.length ? ` (tried: ${refused.join("; ")})` : "";
    void vscode.window.showErrorMessage(
      `runfix needs Python 3.10 or newer to install itself, and found none${tried}. Install one ` +
        "(or choose one in the Python extension), then run “runfix: Install runfix”; or set runfix.path.",
    );
    return undefined;
  }
  const own = ownInstall(storage, process.platform);
  try {
    const runfix = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `runfix: ${why}` },
      (progress) =>
        install(python.command, path.join(serverDir, wheel), storage, process.platform, runProcess, (message) =>
          progress.report({ message }),
        ),
    );
    const version = context.extension.packageJSON.version as string;
    const environment = made(own.config);
    if (environment) {
      fs.writeFileSync(own.marker, marker(version, environment));
    }
    await context.globalState.update(INSTALLED_FOR, version);
    output?.appendLine(`runfix: installed ${wheel} with ${python.command} (${python.from}) in ${storage}`);
    return runfix;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    void vscode.window.showErrorMessage(`runfix: ${message}`, "Show Log").then((choice) => {
      if (choice === "Show Log") {
        output?.show(true);
      }
    });
    return undefined;
  }
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  if (client || !vscode.workspace.isTrusted) {
    return;
  }
  const setting = vscode.workspace.getConfiguration("runfix").get<string>("path");
  let found = findRunfix(setting, folders(), {
    platform: process.platform,
    isExecutable,
    pathDirs: (process.env.PATH ?? "").split(process.platform === "win32" ? ";" : ":"),
  });
  const own = ownInstall(context.globalStorageUri.fsPath, process.platform);
  if (!found && isExecutable(own.runfix)) {
    found = { command: own.runfix, source: "the extension's own install" };
    const version = context.extension.packageJSON.version as string;
    if (ownVersion(context) !== version) {
      // The extension was updated: so is its runfix (the wheel it carries now).
      await installOwn(context, `updating runfix to ${version}`);
    }
  }
  if (!found) {
    // An offer, not a fault: most users have no runfix yet when they first open a file.
    const choice = await vscode.window.showInformationMessage(NOT_FOUND, "Install runfix", "Open Settings");
    if (choice === "Install runfix") {
      const runfix = await installOwn(context, "installing runfix");
      if (runfix && !client) {
        await start(context);
      }
    } else if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "runfix.path");
    }
    return;
  }
  output?.appendLine(`runfix: starting ${found.command} serve (from ${found.source})`);
  runfixCommand = found.command;
  startedPath = setting;
  const keys = settingKeys(context);
  const serverOptions: ServerOptions = { command: found.command, args: ["serve"] };
  const clientOptions: LanguageClientOptions = {
    documentSelector: languages.flatMap((language) => [
      { scheme: "file", language },
      { scheme: "untitled", language },
      // a Jupyter notebook's cells: the server takes the notebook whole (notebook sync)
      { notebook: "jupyter-notebook", language },
    ]),
    // VS Code's Workspace Trust is the decision: the server starts only in a trusted
    // workspace, and then asks no second question before running its code.
    initializationOptions: { ...settings(keys), workspaceTrust: "trusted" },
    synchronize: { configurationSection: "runfix" },
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    middleware: {
      workspace: {
        // The server's "runfix" section: what the user set, not VS Code's defaults.
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          if (!Array.isArray(result)) {
            return result;
          }
          return params.items.map((item, i) =>
            item.section === "runfix"
              ? settings(keys, item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined)
              : result[i],
          );
        },
      },
    },
  };
  client = new LanguageClient("runfix", "runfix", serverOptions, clientOptions);
  client.registerFeature(experimentalFeature);
  context.subscriptions.push(
    client.onRequest("runfix/input", askInput),
    client.onRequest("window/showMessageRequest", askUser),
    client.onNotification("runfix/outputs", (params: { uri: string; rich: number[] }) => {
      // A notebook's cell shows its plots itself: no output view opens for one.
      if (params.uri.startsWith("vscode-notebook-cell:")) {
        notebookKernel?.changed(params);
      } else {
        void views?.changed(params);
      }
    }),
    client.onNotification("runfix/status", (params: { folder: string; state: KernelState; executor: string }) => {
      states.set(params.folder, { state: params.state, executor: params.executor });
      updateStatus();
    }),
  );
  try {
    await client.start();
  } catch (err) {
    void vscode.window.showErrorMessage(`runfix: the server did not start: ${String(err)}`);
    client = undefined;
  }
}

/** Tells the server this client answers `runfix/input` (the code's `input()`, `getpass()`)
 *  and takes `runfix/outputs` (the output view). */
const experimentalFeature: StaticFeature = {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = {
      ...(capabilities.experimental as object | undefined),
      runfixInput: true,
      runfixOutputs: true,
      runfixDebug: true,
    };
  },
  initialize(): void {},
  getState(): FeatureState {
    return { kind: "static" };
  },
  clear(): void {},
};

/** The server's questions (`window/showMessageRequest`), as the language client asks them,
 *  except whether to run flagged code: a modal dialog, which stays until it is answered. As
 *  a notification it slid into the notification centre while the run's progress spun, and
 *  the user never saw what it waited for. */
async function askUser(params: {
  type: number;
  message: string;
  actions?: vscode.MessageItem[];
}): Promise<vscode.MessageItem | null> {
  const modal = runsCode(params.message);
  // (in the dialog, the last answer — "Don't run" — is what Escape and its close button
  // give: no third "Cancel" beside it)
  const actions = (params.actions ?? []).map((a, i, all) => ({
    title: a.title,
    isCloseAffordance: modal && all.length > 1 && i === all.length - 1,
  }));
  const show =
    params.type === 1
      ? vscode.window.showErrorMessage
      : params.type === 2
        ? vscode.window.showWarningMessage
        : vscode.window.showInformationMessage;
  const picked = modal
    ? await show(params.message, { modal: true }, ...actions)
    : await show(params.message, ...actions);
  return picked ? { title: picked.title } : null;
}

/** `runfix/input`: an input box (a password box for `getpass`); Escape declines (the run is cancelled). */
async function askInput(params: {
  prompt?: string;
  password?: boolean;
  timeout?: number;
}): Promise<{ value: string } | null> {
  const within = params.timeout ? ` (answer within ${Math.round(params.timeout)} s)` : "";
  const value = await vscode.window.showInputBox({
    title: `runfix: the running code asks${within}`,
    prompt: params.prompt || "input()",
    password: params.password === true,
    ignoreFocusOut: true,
  });
  return value === undefined ? null : { value };
}

function currentState(): { state: KernelState; executor: string } | undefined {
  const editor = vscode.window.activeTextEditor;
  const folder = editor ? vscode.workspace.getWorkspaceFolder(editor.document.uri) : undefined;
  if (folder) {
    const exact = states.get(folder.uri.toString());
    if (exact) {
      return exact;
    }
  }
  return states.values().next().value;
}

function updateStatus(): void {
  if (!statusItem) {
    return;
  }
  const now = currentState();
  statusItem.text = statusText(now?.state, now?.executor);
  statusItem.tooltip = now ? `runfix kernel: ${now.state} (${now.executor}) — click to interrupt or restart` : "runfix";
  statusItem.show();
}

async function call(command: string, argument?: Record<string, unknown>): Promise<unknown> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage(UNTRUSTED);
    return undefined;
  }
  if (!client) {
    void vscode.window.showWarningMessage("runfix: the server is not running (see runfix: Show Log).");
    return undefined;
  }
  try {
    const result = await client.sendRequest(ExecuteCommandRequest.type, {
      command,
      arguments: argument ? [argument] : [],
    });
    report(result);
    return result;
  } catch (err) {
    void vscode.window.showErrorMessage(`runfix: ${command} failed: ${String(err)}`);
    return undefined;
  }
}

/** A server command for the notebook kernel: its answer, or undefined (logged) when there
 *  is no server or it failed; nothing is shown (the cell shows what happened). */
async function serverCall(command: string, argument: Record<string, unknown>): Promise<unknown> {
  if (!client || !vscode.workspace.isTrusted) {
    output?.warn(`${command}: ${client ? UNTRUSTED : "the server is not running"}`);
    return undefined;
  }
  try {
    return await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] });
  } catch (err) {
    output?.warn(`${command} failed: ${String(err)}`);
    return undefined;
  }
}

/** One run of `runfix.history`. */
interface HistoryRun {
  uri: string;
  path: string;
  first: number;
  last: number;
  code: string;
  origin: string;
  status: string;
  started: number;
  figures: string;
  said?: string;
}

/** What the output view shows for a line; quiet when there is no server or it fails. */
async function outputsAt(uri: string, line: number): Promise<OutputsAnswer | undefined> {
  if (!client) {
    return undefined;
  }
  try {
    return (await client.sendRequest(ExecuteCommandRequest.type, {
      command: "runfix.outputs",
      arguments: [{ uri, position: { line, character: 0 } }],
    })) as OutputsAnswer;
  } catch (err) {
    output?.warn(`runfix.outputs failed: ${String(err)}`);
    return undefined;
  }
}

function report(result: unknown): void {
  if (!result || typeof result !== "object" || !("status" in result)) {
    return;
  }
  const { status, message, attempts, says } = result as {
    status: string;
    message?: string;
    attempts?: number;
    says?: string;
  };
  if (status === "timeout" || status === "failed") {
    void vscode.window.showWarningMessage(`runfix: ${status}${message ? `: ${message}` : ""}`);
  } else if (status === "fixed" && says) {
    // what the fixed code now prints: the person judges the result, not the word "fixed"
    const how = attempts ? `fixed on attempt ${attempts}` : "fixed (no model needed)";
    void vscode.window.showInformationMessage(`runfix: ${how}; it now prints \`${says}\``);
  }
}

function editorArgument(): { uri: string; editor: vscode.TextEditor } | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor || !languages.includes(editor.document.languageId)) {
    void vscode.window.showInformationMessage(
      `runfix: open a file of a language it runs first (${languages.join(", ")}: runfix.languages).`,
    );
    return undefined;
  }
  return { uri: editor.document.uri.toString(), editor };
}

/** The active document runfix runs, if any (no argument: every folder's kernel). */
function activeDocument(): { uri: string } | undefined {
  const editor = vscode.window.activeTextEditor;
  return editor && languages.includes(editor.document.languageId)
    ? { uri: editor.document.uri.toString() }
    : undefined;
}

function position(editor: vscode.TextEditor): { line: number; character: number } {
  return { line: editor.selection.active.line, character: editor.selection.active.character };
}

function range(editor: vscode.TextEditor): Record<string, unknown> {
  const { start, end } = editor.selection;
  return {
    start: { line: start.line, character: start.character },
    end: { line: end.line, character: end.character },
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("runfix", { log: true });
  userOnly = userOnlyKeys(context);
  statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  statusItem.command = "runfix.vscode.kernelMenu";
  languages = chosenLanguages(vscode.workspace.getConfiguration("runfix").get("languages"));
  // The palette's and Shift+Enter's `when` clauses: `editorLangId in runfix.languages`.
  void vscode.commands.executeCommand("setContext", "runfix.languages", languages);
  views = new OutputViews(outputsAt, (document) => languages.includes(document.languageId));
  context.subscriptions.push(output, statusItem, views);
  notebookKernel = notebookController(serverCall, languages);
  context.subscriptions.push(notebookKernel);

  const register = (id: string, run: () => unknown): void => {
    context.subscriptions.push(vscode.commands.registerCommand(id, run));
  };
  register("runfix.vscode.runCell", () => {
    const target = editorArgument();
    return target && call("runfix.run", { uri: target.uri, position: position(target.editor) });
  });
  register("runfix.vscode.runSelection", () => {
    const target = editorArgument();
    if (!target) {
      return undefined;
    }
    if (target.editor.selection.isEmpty) {
      return call("runfix.run", { uri: target.uri, position: position(target.editor) });
    }
    return call("runfix.run", { uri: target.uri, range: range(target.editor) });
  });
  register("runfix.vscode.runFile", () => {
    const target = editorArgument();
    return target && call("runfix.run", { uri: target.uri });
  });
  register("runfix.vscode.runAndFix", () => {
    const target = editorArgument();
    if (!target) {
      return undefined;
    }
    const where = target.editor.selection.isEmpty
      ? { position: position(target.editor) }
      : { range: range(target.editor) };
    return call("runfix.runAndFix", { uri: target.uri, ...where });
  });
  for (const [id, command] of [
    ["runfix.vscode.runAbove", "runfix.runAbove"],
    ["runfix.vscode.runBelow", "runfix.runBelow"],
    ["runfix.vscode.runDependents", "runfix.runDependents"],
    ["runfix.vscode.restartAndRunTo", "runfix.restartAndRunTo"],
    ["runfix.vscode.runTests", "runfix.runTests"],
    ["runfix.vscode.fixTests", "runfix.fixTests"],
  ]) {
    register(id, () => {
      const target = editorArgument();
      return target && call(command, { uri: target.uri, position: position(target.editor) });
    });
  }
  register("runfix.vscode.generate", () => {
    const target = editorArgument();
    return target && call("runfix.generate", { uri: target.uri, position: position(target.editor), run: false });
  });
  register("runfix.vscode.interrupt", () => call("runfix.interrupt", activeDocument()));
  register("runfix.vscode.restart", () => call("runfix.restart", activeDocument()));
  register("runfix.vscode.clear", () => call("runfix.clear"));
  register("runfix.vscode.variables", async () => {
    const target = editorArgument();
    if (!target) {
      return;
    }
    const variables = (await call("runfix.variables", { uri: target.uri })) as
      | { name: string; type: string; summary: string; shape?: number[]; length?: number }[]
      | undefined;
    if (!variables) {
      return;
    }
    await vscode.window.showQuickPick(
      variables.map((v) => ({
        label: v.name,
        description: v.type + (v.shape ? ` ${v.shape.join("×")}` : v.length != null ? ` len ${v.length}` : ""),
        detail: v.summary,
      })),
      { title: "runfix: kernel variables", placeHolder: variables.length ? "" : "no variables" },
    );
  });
  register("runfix.vscode.showOutput", () => {
    const target = editorArgument();
    return target && views?.show(target.editor);
  });
  register("runfix.vscode.showHistory", async () => {
    const target = activeDocument();
    const runs = (await call("runfix.history", target ? { uri: target.uri, limit: 200 } : { limit: 200 })) as
      | HistoryRun[]
      | undefined;
    if (!runs) {
      return;
    }
    const chosen = await vscode.window.showQuickPick(
      runs.map((run) => ({
        label: `${run.status === "ok" ? "$(pass)" : "$(error)"} ${path.basename(run.path)}:${run.first + 1}`,
        description: `${new Date(run.started * 1000).toLocaleString()} · ${run.origin} · ${run.figures}`,
        detail: run.said || run.code.split("\n")[0],
        run,
      })),
      {
        title: target ? "runfix: runs of this file" : "runfix: runs",
        placeHolder: runs.length ? "reveal a run's code and its outputs" : "no runs recorded yet",
        matchOnDescription: true,
        matchOnDetail: true,
      },
    );
    if (!chosen) {
      return;
    }
    const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(chosen.run.uri));
    const editor = await vscode.window.showTextDocument(document);
    const end = document.lineAt(Math.min(chosen.run.last, document.lineCount - 1)).range.end;
    editor.selection = new vscode.Selection(end, new vscode.Position(chosen.run.first, 0)); // cursor at its start
    editor.revealRange(editor.selection, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    await views?.show(editor);
  });
  register("runfix.vscode.export", async () => {
    const target = editorArgument();
    if (!target) {
      return;
    }
    const done = (await call("runfix.export", { uri: target.uri })) as
      | { path: string; cells: number; withOutputs: number }
      | undefined;
    if (done) {
      const choice = await vscode.window.showInformationMessage(
        `runfix: wrote ${path.basename(done.path)} (${done.cells} cells, ${done.withOutputs} with outputs)`,
        "Open",
      );
      if (choice === "Open") {
        await vscode.commands.executeCommand("vscode.open", vscode.Uri.file(done.path));
      }
    }
  });
  register("runfix.vscode.showLog", () => output?.show(true));
  register("runfix.vscode.install", async () => {
    const runfix = await installOwn(context, "installing runfix");
    if (runfix && !client) {
      await start(context);
    } else if (runfix) {
      void vscode.window.showInformationMessage(
        "runfix: installed in the extension's own environment; it is used where no runfix.path, " +
          "workspace .venv or PATH has one.",
      );
    }
  });
  register("runfix.debugCell", (where?: DebugWhere) => debugAt(where, false));
  register("runfix.debugError", (where?: DebugWhere) => debugAt(where, true));
  register("runfix.vscode.postMortem", () => debugAt(undefined, false, true));
  context.subscriptions.push(
    vscode.debug.registerDebugAdapterDescriptorFactory("runfix", {
      createDebugAdapterDescriptor() {
        if (!runfixCommand) {
          throw new Error("runfix is not running yet: open a Python file of the folder first");
        }
        return new vscode.DebugAdapterExecutable(runfixCommand, ["dap"]);
      },
    }),
    vscode.debug.registerDebugConfigurationProvider("runfix", {
      // F5 without a launch.json: the cell at the cursor.
      resolveDebugConfiguration(_folder, config) {
        if (!config.type && !config.request) {
          const editor = vscode.window.activeTextEditor;
          return editor ? debugConfiguration(editor.document.uri, editor.selection.active.line, false) : undefined;
        }
        return config;
      },
    }),
  );
  register("runfix.vscode.kernelMenu", async () => {
    const choice = await vscode.window.showQuickPick(["Interrupt", "Restart Kernel", "Show Log"], {
      title: `runfix kernel: ${currentState()?.state ?? "not started"}`,
    });
    if (choice === "Interrupt") {
      await vscode.commands.executeCommand("runfix.vscode.interrupt");
    } else if (choice === "Restart Kernel") {
      await vscode.commands.executeCommand("runfix.vscode.restart");
    } else if (choice === "Show Log") {
      output?.show(true);
    }
  });

  context.subscriptions.push(
    vscode.window.onDidChangeActiveTextEditor(() => updateStatus()),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void start(context)),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      // A new runfix.path restarts the server, or starts it when none could be found before.
      // (When a debug session starts, code-server says the setting changed and reads it blank
      // for a moment: a running server, its kernel and the session are kept then.)
      const now = vscode.workspace.getConfiguration("runfix").get<string>("path");
      const changed = now ? now !== startedPath : !client;
      if (event.affectsConfiguration("runfix.path") && changed) {
        output?.appendLine(`runfix: runfix.path is now ${now || "unset"}: restarting the server`);
        const old = client;
        client = undefined;
        await old?.stop();
        await start(context);
      }
    }),
  );
  updateStatus();
  if (!vscode.workspace.isTrusted) {
    output.appendLine(UNTRUSTED);
    return;
  }
  await start(context);
}

/** Where a lens or a code action debugs: a document (a notebook cell's URI too) and a line (0-based). */
interface DebugWhere {
  uri?: string;
  line?: number;
}

/** A launch of runfix's debug adapter on the cell holding `line` (0-based) of `uri`
 *  (`postMortem`: the kernel's last error, nothing run again). */
function debugConfiguration(
  uri: vscode.Uri,
  line: number,
  stopOnError: boolean,
  postMortem = false,
): vscode.DebugConfiguration {
  const name = postMortem ? "runfix: The Last Error" : stopOnError ? "runfix: Debug This Error" : "runfix: Debug Cell";
  return {
    type: "runfix",
    request: "launch",
    name,
    program: uri.scheme === "file" ? uri.fsPath : uri.toString(),
    line: line + 1,
    stopOnError,
    postMortem,
  };
}

/** Debug Cell / Debug This Error: the lens's or action's cell, else the cursor's. */
async function debugAt(where: DebugWhere | undefined, stopOnError: boolean, postMortem = false): Promise<boolean> {
  const editor = vscode.window.activeTextEditor;
  const uri = where?.uri ? vscode.Uri.parse(where.uri) : editor?.document.uri;
  const line = where?.line ?? editor?.selection.active.line;
  if (!uri || line === undefined) {
    return false;
  }
  const folder = vscode.workspace.getWorkspaceFolder(uri);
  return vscode.debug.startDebugging(folder, debugConfiguration(uri, line, stopOnError, postMortem));
}

export async function deactivate(): Promise<void> {
  if (client) {
    output?.appendLine("runfix: the extension is deactivated: stopping the server");
    await client.stop();
    client = undefined;
  }
}
