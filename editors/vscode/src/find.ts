// Where the `runfix` command is: the runfix.path setting, then the workspace's
// .venv/venv, then PATH. Pure (the file checks come in), so it is unit-tested without VS Code.
import * as path from "path";

export interface Found {
  command: string;
  source: string;
}

export interface Lookup {
  platform: NodeJS.Platform;
  /** Whether a file exists and may be run. */
  isExecutable(file: string): boolean;
  /** The PATH entries. */
  pathDirs: string[];
}

function binary(platform: NodeJS.Platform): { dir: string; name: string } {
  return platform === "win32" ? { dir: "Scripts", name: "runfix.exe" } : { dir: "bin", name: "runfix" };
}

export function findRunfix(
  setting: string | undefined,
  folders: string[],
  lookup: Lookup,
): Found | undefined {
  const { dir, name } = binary(lookup.platform);
  const join = lookup.platform === "win32" ? path.win32.join : path.posix.join;
  if (setting && setting.trim()) {
    const chosen = setting.trim();
    const inFolder = folders.length > 0 && !isAbsolute(chosen, lookup.platform) ? join(folders[0], chosen) : chosen;
    return { command: inFolder, source: "the runfix.path setting" };
  }
  for (const folder of folders) {
    for (const venv of [".venv", "venv"]) {
      const candidate = join(folder, venv, dir, name);
      if (lookup.isExecutable(candidate)) {
        return { command: candidate, source: `the workspace's ${venv}` };
      }
    }
  }
  for (const entry of lookup.pathDirs) {
    if (!entry) {
      continue;
    }
    const candidate = join(entry, name);
    if (lookup.isExecutable(candidate)) {
      return { command: candidate, source: "PATH" };
    }
  }
  return undefined;
}

function isAbsolute(p: string, platform: NodeJS.Platform): boolean {
  return platform === "win32" ? path.win32.isAbsolute(p) : path.posix.isAbsolute(p);
}

export const NOT_FOUND =
  "runfix: the `runfix` command was not found (looked at the runfix.path setting, the " +
  "workspace's .venv and venv, and PATH). Install runfix: a virtual environment of its own " +
  "in VS Code's storage, made with your Python 3.10+. Or set runfix.path to the command.";

/** One setting as VS Code's `inspect()` sees it: its value in each scope that sets it. */
export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * The settings the user set, each from the narrowest scope that sets it, as dotted keys
 * ("model.name"). Never VS Code's defaults: the server has its own, and a default sent as
 * if chosen would hide the project's pyproject.toml. Never runfix.path or runfix.openOutput:
 * the extension's own.
 */
/** Settings the extension reads itself: never sent to the server. */
const EXTENSION_ONLY = new Set(["path", "openOutput", "languages"]);

export function serverSettings(
  keys: string[],
  inspect: (key: string) => Inspected | undefined,
  userOnly: ReadonlySet<string> = new Set(),
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    if (EXTENSION_ONLY.has(key)) {
      continue;
    }
    const seen = inspect(key);
    const value = userOnly.has(key)
      ? seen?.globalValue
      : (seen?.workspaceFolderValue ?? seen?.workspaceValue ?? seen?.globalValue);
    if (value !== undefined) {
      out[key] = value;
    }
  }
  return out;
}

/**
 * The settings a workspace set that only the user's own settings may (`userOnly`: where
 * requests go, which key is sent): ignored, and said so once.
 */
export function ignoredInWorkspace(
  keys: string[],
  inspect: (key: string) => Inspected | undefined,
  userOnly: ReadonlySet<string>,
): string[] {
  return keys.filter((key) => {
    const seen = inspect(key);
    return userOnly.has(key) && (seen?.workspaceValue !== undefined || seen?.workspaceFolderValue !== undefined);
  });
}

export type KernelState = "new" | "starting" | "idle" | "busy" | "dead" | "stopped";

/** The status bar text for a folder's kernel. */
export function statusText(state: KernelState | undefined, executor: string | undefined): string {
  const icons: Record<string, string> = {
    new: "$(circle-outline)",
    starting: "$(loading~spin)",
    idle: "$(circle-filled)",
    busy: "$(sync~spin)",
    dead: "$(error)",
    stopped: "$(circle-slash)",
  };
  if (!state) {
    return "$(circle-outline) runfix";
  }
  return `${icons[state] ?? ""} runfix: ${state} · ${executor ?? "kernel"}`;
}

/** The languages runfix runs, by VS Code's language id: Python's own, the others in their Jupyter kernels. */
export const LANGUAGES = ["python", "r", "shellscript", "typescript", "javascript", "julia", "lua"];

/** The languages of the runfix.languages setting that runfix runs (all of them when unset or not a list). */
export function chosenLanguages(setting: unknown): string[] {
  if (!Array.isArray(setting)) {
    return [...LANGUAGES];
  }
  return LANGUAGES.filter((language) => setting.includes(language));
}

/** Whether a question of the server's asks to run code runfix flagged or held on the
 *  user's machine: "… starts a process (subprocess.run). Run it in the local kernel?", "…
 *  tried writing x. runfix's jail refused it … Run it in the kernel?" (asked as a dialog
 *  that stays: `askUser`). */
export function runsCode(message: string): boolean {
  return /Run it in the (local )?kernel\?$/.test(message);
}
