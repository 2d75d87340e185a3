// The runfix wheel the .vsix carries (server/runfix_lsp-<version>-py3-none-any.whl): built from
// this checkout by pip (`pip wheel --no-deps`, hatchling fetched for the build), with the
// checkout's .venv Python, else python3. The extension installs it when no runfix is found.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..", "..");
const server = path.resolve(here, "..", "server");
const venv = path.join(root, ".venv", "bin", "python");
const python = process.env.RUNFIX_PYTHON || (fs.existsSync(venv) ? venv : "python3");
fs.rmSync(server, { recursive: true, force: true });
fs.mkdirSync(server);
const built = spawnSync(
  python,
  ["-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", server, root],
  { stdio: "inherit" },
);
const wheels = fs.readdirSync(server).filter((n) => n.endsWith(".whl"));
if (built.status !== 0 || wheels.length !== 1) {
  console.error(`bundle-server: could not build runfix's wheel with ${python}`);
  process.exit(1);
}
console.log(`bundle-server: server/${wheels[0]}`);
