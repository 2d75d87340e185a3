// runfix's own install: when no `runfix` is found, the extension offers to make a virtual
// environment in its global storage with a Python 3.10+ it finds (the Python extension's
// choice, else python3 on PATH) and to install runfix there from the wheel the .vsix carries;
// an update of the extension updates that environment. The pure parts are here (unit-tested
// without VS Code); the running of processes comes in as functions.
import * as path from "path";

/** The oldest Python runfix runs on. */
export const MIN_PYTHON: [number, number] = [3, 10];

/**
 * Where the extension's own environment and its `runfix` are, and the marker beside it that
 * says which extension version's wheel it holds (a file: VS Code's globalState is not kept
 * when a server is stopped by SIGTERM, and an update then ran on every start).
 */
export function ownInstall(
  storage: string,
  platform: NodeJS.Platform,
): { venv: string; python: string; runfix: string; marker: string; config: string } {
  const join = platform === "win32" ? path.win32.join : path.posix.join;
  const venv = join(storage, "runfix-venv");
  const bin = platform === "win32" ? "Scripts" : "bin";
  const exe = platform === "win32" ? ".exe" : "";
  return {
    venv,
    python: join(venv, bin, `python${exe}`),
    runfix: join(venv, bin, `runfix${exe}`),
    marker: join(storage, "runfix-venv.installed"),
    config: join(venv, "pyvenv.cfg"),
  };
}

/** What identifies one making of the environment: its pyvenv.cfg (`venv --clear` writes it anew). */
export interface Made {
  ino: number;
  mtimeMs: number;
}

/** The marker's text: the version installed, and the environment it was installed into. */
export function marker(version: string, made: Made): string {
  return JSON.stringify({ version, ino: made.ino, mtimeMs: made.mtimeMs });
}

/**
 * The extension version the environment holds, by the marker, or undefined when there is no
 * marker, it does not parse, or it was written for another making of the environment (one
 * made again by hand, or whose install did not finish).
 */
export function installedVersion(text: string | undefined, made: Made | undefined): string | undefined {
  if (text === undefined || made === undefined) {
    return undefined;
  }
  try {
    const said = JSON.parse(text) as { version?: unknown; ino?: unknown; mtimeMs?: unknown };
    const same = said.ino === made.ino && said.mtimeMs === made.mtimeMs;
    return same && typeof said.version === "string" ? said.version : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The interpreters of these names on PATH, as absolute paths: a relative entry (`.`, an empty
 * one) is skipped, as it names whatever folder the process happens to be in.
 */
export function onPath(
  names: string[],
  pathDirs: string[],
  isExecutable: (file: string) => boolean,
  platform: NodeJS.Platform,
): string[] {
  const p = platform === "win32" ? path.win32 : path.posix;
  const exe = platform === "win32" ? ".exe" : "";
  const found: string[] = [];
  for (const name of names) {
    for (const dir of pathDirs) {
      const file = p.join(dir, name + exe);
      if (p.isAbsolute(dir) && isExecutable(file) && !found.includes(file)) {
        found.push(file);
      }
    }
  }
  return found;
}

/** `3.11` (what `python -c` printed) → [3, 11]; undefined for anything else. */
export function parseVersion(text: string): [number, number] | undefined {
  const match = /^(\d+)\.(\d+)\s*$/.exec(text.trim());
  return match ? [Number(match[1]), Number(match[2])] : undefined;
}

export function recentEnough(version: [number, number] | undefined): boolean {
  return version !== undefined && (version[0] > MIN_PYTHON[0] || (version[0] === MIN_PYTHON[0] && version[1] >= MIN_PYTHON[1]));
}

/** The wheel the .vsix carries (`server/runfix_lsp-<version>-….whl`), newest version first. */
export function bundledWheel(names: string[]): string | undefined {
  const wheels = names.filter((n) => /^runfix_lsp-[^-]+-.+\.whl$/.test(n));
  const version = (n: string): number[] => n.split("-")[1].split(".").map((p) => Number.parseInt(p, 10) || 0);
  wheels.sort((a, b) => {
    const [x, y] = [version(a), version(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) {
        return (y[i] ?? 0) - (x[i] ?? 0);
      }
    }
    return 0;
  });
  return wheels[0];
}

/**
 * Whether an interpreter lives outside every workspace folder. runfix's own environment is
 * made with it and then serves every workspace, so an interpreter a folder ships (its
 * `.venv/bin/python`, which the Python extension may have chosen) is never used for it: that
 * folder's code would run in all the others.
 */
export function outsideFolders(executable: string, folders: string[], platform: NodeJS.Platform): boolean {
  const rel = platform === "win32" ? path.win32.relative : path.posix.relative;
  const abs = platform === "win32" ? path.win32.isAbsolute : path.posix.isAbsolute;
  return folders.every((folder) => {
    const inside = rel(folder, executable);
    return inside.startsWith("..") || abs(inside);
  });
}

export const VERSION_CHECK = "import sys; print('%d.%d' % sys.version_info[:2])";

export type Run = (command: string, args: string[], onLine?: (line: string) => void) => Promise<{ code: number; output: string }>;

/** The first candidate interpreter that is Python 3.10+, and why the others were not. */
export async function choosePython(
  candidates: { command: string; from: string }[],
  run: Run,
): Promise<{ python?: { command: string; from: string }; refused: string[] }> {
  const refused: string[] = [];
  for (const candidate of candidates) {
    let answer: { code: number; output: string };
    try {
      answer = await run(candidate.command, ["-I", "-c", VERSION_CHECK]);
    } catch (err) {
      refused.push(`${candidate.command} (${candidate.from}): ${String(err)}`);
      continue;
    }
    const version = parseVersion(answer.output);
    if (answer.code === 0 && recentEnough(version)) {
      return { python: candidate, refused };
    }
    const said = version ? `Python ${version.join(".")}` : answer.output.trim().split("\n").pop() || `exit ${answer.code}`;
    refused.push(`${candidate.command} (${candidate.from}): ${said}`);
  }
  return { refused };
}

/**
 * Make the environment with `python` and install the wheel into it (its dependencies from
 * the package index); the `runfix` it gives. Throws, saying which step failed and its last
 * lines, when one does.
 */
export async function install(
  python: string,
  wheel: string,
  storage: string,
  platform: NodeJS.Platform,
  run: Run,
  say: (message: string) => void,
): Promise<string> {
  const own = ownInstall(storage, platform);
  say(`making a virtual environment with ${python}`);
  // -I: no PYTHONPATH, no user site, and not the current folder on sys.path (a folder's
  // venv.py or pip.py would otherwise be what runs).
  const made = await run(python, ["-I", "-m", "venv", "--clear", own.venv]);
  if (made.code !== 0) {
    throw new Error(`\`${python} -m venv\` failed (on Debian and Ubuntu: apt install python3-venv): ${tail(made.output)}`);
  }
  say("installing runfix and its packages (a minute or two the first time)");
  const pip = await run(
    own.python,
    ["-I", "-m", "pip", "install", "--disable-pip-version-check", "--upgrade", wheel],
    (line) => {
      const what = /^(Collecting|Downloading|Installing|Successfully)\b.*/.exec(line.trim());
      if (what) {
        say(what[0].slice(0, 100));
      }
    },
  );
  if (pip.code !== 0) {
    throw new Error(`installing runfix failed: ${tail(pip.output)}`);
  }
  return own.runfix;
}

function tail(output: string): string {
  return output.trim().split("\n").slice(-3).join(" ").slice(0, 400);
}
