// runfix as a kernel in VS Code's notebook picker ("runfix — this folder's kernel"): a
// NotebookController for Jupyter notebooks whose cells run in the folder's runfix kernel.
// The server has the notebook already (LSP notebook sync: one document of its code cells);
// a cell runs with `runfix.run` on its URI, so a run from here and one from runfix's own
// commands are the same run (one kernel, one record, one set of results, fixes and hints
// on the cell). What the cell showed comes back with `runfix.outputs` and is written into
// the cell as Jupyter saves it — the kernel's own mime bundles (pandas' HTML table with its
// text), the last statement's value as the cell's result, the kernel's execution count —
// so the `.ipynb` VS Code saves is the one Jupyter would; runfix's summaries (a table's
// first rows, a value's one line) stay in the editor's hints, hovers and output panel.
// Where the server kept no such record of the run (another language's kernel), the cell
// gets runfix's summaries: text, images, tables and markdown; an error with its message.
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";

import { inside, type OutputItem, type OutputsAnswer } from "./outputView";

/** The server's commands, as the extension calls them (undefined: no server, or it failed). */
export type Call = (command: string, argument: Record<string, unknown>) => Promise<unknown>;

const IMAGE_TYPES: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".svg": "image/svg+xml",
};

/** A stored output file's bytes, only from the folder's outputs directory. */
function stored(dir: string, file: string | undefined): Uint8Array | undefined {
  const real = file && inside(dir, file);
  if (!real) {
    return undefined;
  }
  try {
    return fs.readFileSync(real);
  } catch {
    return undefined;
  }
}

/** One statement's output as a notebook cell's output: what it printed as a stream, a
 *  value or a display as its richest forms and its text. */
export function cellOutput(dir: string, item: OutputItem): vscode.NotebookCellOutput {
  if (item.printed) {
    return new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.stdout(item.text)]);
  }
  const items: vscode.NotebookCellOutputItem[] = [];
  const image = item.image ? stored(dir, item.image) : undefined;
  if (image && item.image) {
    const mime = IMAGE_TYPES[path.extname(item.image).toLowerCase()];
    if (mime) {
      items.push(new vscode.NotebookCellOutputItem(image, mime));
    }
  }
  if (item.table) {
    items.push(vscode.NotebookCellOutputItem.text(item.table, "text/markdown"));
  } else if (item.markdown) {
    items.push(vscode.NotebookCellOutputItem.text(item.markdown, "text/markdown"));
  }
  items.push(vscode.NotebookCellOutputItem.text(item.text, "text/plain"));
  return new vscode.NotebookCellOutput(items);
}

/** A stored cell's outputs as Jupyter saves them (nbformat 4), as VS Code's own `.ipynb`
 *  serializer reads them back: its `outputType`, `executionCount` and the error's traceback
 *  in each output's metadata. */
export function jupyterOutputs(outputs: JupyterOutput[]): vscode.NotebookCellOutput[] {
  const joined = (value: unknown): string => (Array.isArray(value) ? value.join("") : String(value ?? ""));
  const made: vscode.NotebookCellOutput[] = [];
  for (const output of outputs) {
    if (output.output_type === "stream") {
      const text = joined(output.text);
      const item =
        output.name === "stderr"
          ? vscode.NotebookCellOutputItem.stderr(text)
          : vscode.NotebookCellOutputItem.stdout(text);
      made.push(new vscode.NotebookCellOutput([item], { outputType: "stream" }));
    } else if (output.output_type === "error") {
      const traceback = Array.isArray(output.traceback) ? output.traceback : [];
      const error = { name: String(output.ename ?? ""), message: String(output.evalue ?? ""), stack: traceback.join("\n") };
      made.push(
        new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error(error)], {
          outputType: "error",
          originalError: output,
        }),
      );
    } else {
      const items: vscode.NotebookCellOutputItem[] = [];
      for (const [mime, value] of Object.entries(output.data ?? {})) {
        if (mime.startsWith("image/") && mime !== "image/svg+xml") {
          items.push(new vscode.NotebookCellOutputItem(Buffer.from(joined(value), "base64"), mime));
        } else if (typeof value === "string" || Array.isArray(value)) {
          items.push(vscode.NotebookCellOutputItem.text(joined(value), mime));
        } else {
          items.push(vscode.NotebookCellOutputItem.json(value, mime));
        }
      }
      made.push(
        new vscode.NotebookCellOutput(items, {
          outputType: output.output_type,
          executionCount: output.execution_count ?? null,
          metadata: output.metadata ?? {},
        }),
      );
    }
  }
  return made;
}

/** An output as nbformat 4 keeps it (what the server stores for a notebook's cell). */
export interface JupyterOutput {
  output_type: string;
  name?: string;
  text?: string | string[];
  data?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  execution_count?: number | null;
  ename?: string;
  evalue?: string;
  traceback?: string[];
}

/** What the server stored for a cell's latest run: its outputs and count, or undefined. */
function savedCell(shown: OutputsAnswer | undefined): { outputs: JupyterOutput[]; count: number | null } | undefined {
  const raw = shown?.cell ? stored(shown.outputsDir, shown.cell) : undefined;
  if (!raw) {
    return undefined;
  }
  try {
    const kept = JSON.parse(Buffer.from(raw).toString("utf8")) as { outputs?: unknown; execution_count?: unknown };
    if (!Array.isArray(kept.outputs)) {
      return undefined;
    }
    const count = typeof kept.execution_count === "number" ? kept.execution_count : null;
    return { outputs: kept.outputs as JupyterOutput[], count };
  } catch {
    return undefined;
  }
}

/** The errors a cell's run raised: on the cell, or on another cell (in a function it
 *  defines) with this cell among the places that called it. */
function errorsOf(cell: vscode.NotebookCell): vscode.Diagnostic[] {
  const uri = cell.document.uri.toString();
  const found: vscode.Diagnostic[] = [];
  for (const other of cell.notebook.getCells()) {
    for (const problem of vscode.languages.getDiagnostics(other.document.uri)) {
      if (problem.severity !== vscode.DiagnosticSeverity.Error) {
        continue;
      }
      const called = (problem.relatedInformation ?? []).some((r) => r.location.uri.toString() === uri);
      if (other === cell || called) {
        found.push(problem);
      }
    }
  }
  return found;
}

/** What a cell shows of its latest run: as Jupyter saves it where the server kept that
 *  (with the kernel's execution count), else the outputs of its statements (printed text
 *  joined as Jupyter joins a stream), then its errors. */
async function outputsOf(
  call: Call,
  cell: vscode.NotebookCell,
): Promise<{ outputs: vscode.NotebookCellOutput[]; count?: number }> {
  // Line -1 of the cell is its marker line in the server's document of the notebook:
  // the outputs of every statement of the cell, not only of its first line's.
  const uri = cell.document.uri.toString();
  const shown = (await call("runfix.outputs", { uri, position: { line: -1, character: 0 } })) as
    | OutputsAnswer
    | undefined;
  const saved = savedCell(shown);
  if (saved) {
    return { outputs: jupyterOutputs(saved.outputs), count: saved.count ?? undefined };
  }
  const outputs: vscode.NotebookCellOutput[] = [];
  let printed = "";
  const flush = (): void => {
    if (printed) {
      outputs.push(new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.stdout(printed)]));
      printed = "";
    }
  };
  for (const item of shown?.outputs ?? []) {
    if (item.printed) {
      printed += item.text;
      continue;
    }
    flush();
    outputs.push(cellOutput(shown?.outputsDir ?? "", item));
  }
  flush();
  for (const problem of errorsOf(cell)) {
    const error = new Error(problem.message);
    error.name = problem.message.split(":")[0] || "Error";
    error.stack = problem.message;
    outputs.push(new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error(error)]));
  }
  return { outputs };
}

/** VS Code's ipynb serializer saves a cell's execution count only in a notebook whose
 *  metadata names its language (`language_info.name`, which Jupyter's kernel writes at
 *  its first run): a notebook without it (made by nbformat, or with only a kernelspec) was
 *  saved with `execution_count: null` on every cell while the editor showed [1], [2].
 *  Written once, before a run, as a kernel writes it; a notebook that names it is left. */
async function nameLanguage(notebook: vscode.NotebookDocument, language: string): Promise<void> {
  const metadata: Record<string, unknown> = { ...(notebook.metadata ?? {}) };
  const inner = (metadata.metadata ?? {}) as Record<string, unknown>;
  const info = (inner.language_info ?? {}) as Record<string, unknown>;
  if (notebook.notebookType !== "jupyter-notebook" || (typeof info.name === "string" && info.name)) {
    return;
  }
  const named = { ...metadata, metadata: { ...inner, language_info: { ...info, name: language } } };
  const edit = new vscode.WorkspaceEdit();
  edit.set(notebook.uri, [vscode.NotebookEdit.updateNotebookMetadata(named)]);
  await vscode.workspace.applyEdit(edit);
}

/** The runfix notebook kernel, and what it does when a run it did not start (an agent's,
 *  Run and Fix's, runfix's own Run Cell) gave a cell new results. */
export interface RunfixKernel extends vscode.Disposable {
  changed(params: { uri: string }): void;
}

/** Registers the runfix notebook kernel; `call` reaches the server. */
export function notebookController(call: Call, languages: string[]): RunfixKernel {
  const controller = vscode.notebooks.createNotebookController(
    "runfix",
    "jupyter-notebook",
    "runfix — this folder's kernel",
  );
  controller.description = "runs, fixes and checks cells in runfix's kernel";
  controller.supportedLanguages = languages;
  controller.supportsExecutionOrder = true;
  let order = 0;
  const running = new Set<string>(); // the cells this kernel is running (by URI)
  const picked = new Set<string>(); // the notebooks that picked this kernel
  const selection = controller.onDidChangeSelectedNotebooks(({ notebook, selected }) => {
    if (selected) {
      picked.add(notebook.uri.toString());
    } else {
      picked.delete(notebook.uri.toString());
    }
  });
  const waiting = new Map<string, ReturnType<typeof setTimeout>>();

  async function run(cell: vscode.NotebookCell): Promise<boolean> {
    await nameLanguage(cell.notebook, cell.document.languageId);
    const execution = controller.createNotebookCellExecution(cell);
    execution.executionOrder = ++order;
    execution.start(Date.now());
    const uri = cell.document.uri.toString();
    const interrupt = execution.token.onCancellationRequested(() => {
      void call("runfix.interrupt", { uri: cell.notebook.uri.toString() });
    });
    let ok = false;
    running.add(uri);
    try {
      await execution.clearOutput();
      const answer = (await call("runfix.run", { uri, position: { line: 0, character: 0 } })) as
        | { status?: string; message?: string }
        | undefined;
      ok = answer?.status === "ok";
      const { outputs, count } = await outputsOf(call, cell);
      if (count !== undefined) {
        execution.executionOrder = count; // the kernel's own count, as Jupyter saves it
      }
      if (!ok && answer?.message && outputs.length === 0) {
        outputs.push(new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.stderr(answer.message)]));
      }
      await execution.replaceOutput(outputs);
    } finally {
      running.delete(uri);
      interrupt.dispose();
      execution.end(ok, Date.now());
    }
    return ok;
  }

  /** A run this kernel did not start gave `cell` new results: they show in its outputs
   *  (it ran, so it counts as an execution), on notebooks that picked this kernel. */
  async function show(cell: vscode.NotebookCell): Promise<void> {
    const uri = cell.document.uri.toString();
    if (running.has(uri) || !picked.has(cell.notebook.uri.toString())) {
      return; // its own run shows it; or another kernel's notebook
    }
    await nameLanguage(cell.notebook, cell.document.languageId);
    let execution: vscode.NotebookCellExecution;
    try {
      execution = controller.createNotebookCellExecution(cell);
    } catch {
      return; // it is running in this kernel already
    }
    execution.executionOrder = ++order;
    execution.start(Date.now());
    let ok = true;
    try {
      const { outputs, count } = await outputsOf(call, cell);
      if (count !== undefined) {
        execution.executionOrder = count;
      }
      ok = !outputs.some((o) => o.items.some((i) => i.mime === "application/vnd.code.notebook.error"));
      await execution.replaceOutput(outputs);
    } finally {
      execution.end(ok, Date.now());
    }
  }

  controller.executeHandler = async (cells) => {
    for (const cell of cells) {
      if (!(await run(cell))) {
        break; // as Jupyter's Run All: the cells after a failing one do not run
      }
    }
  };
  controller.interruptHandler = async (notebook) => {
    await call("runfix.interrupt", { uri: notebook.uri.toString() });
  };
  return {
    changed(params: { uri: string }): void {
      const cell = vscode.workspace.notebookDocuments
        .flatMap((notebook) => notebook.getCells())
        .find((c) => c.document.uri.toString() === params.uri);
      if (!cell || running.has(params.uri)) {
        return; // (this kernel's own run shows what it gave)
      }
      // Once its diagnostics (the error it raised) have come too: a short wait, per cell.
      clearTimeout(waiting.get(params.uri));
      waiting.set(
        params.uri,
        setTimeout(() => {
          waiting.delete(params.uri);
          void show(cell);
        }, 300),
      );
    },
    dispose(): void {
      waiting.forEach((timer) => clearTimeout(timer));
      selection.dispose();
      controller.dispose();
    },
  };
}
