// The output view: a webview panel beside the editor, one per workspace folder, showing the
// outputs of the statement (or cell) under the cursor — plots, DataFrame tables, kernel HTML,
// coloured text — and the folder's latest images to flip through and compare.
//
// What it shows comes from the server (`runfix.outputs`); files are read only from the
// folder's .runfix/outputs. The panel's Content-Security-Policy lets only its own script run
// (a nonce); a kernel's HTML goes into a sandboxed frame (no scripts, no same origin), so no
// script a kernel sent ever runs, here or anywhere in VS Code.
import * as crypto from "crypto";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";

export interface OutputItem {
  kind: string;
  text: string;
  image?: string;
  file?: string;
  table?: string;
  markdown?: string;
  colored?: string;
  printed?: boolean;
}

export interface OutputsAnswer {
  uri: string;
  folder: string;
  first?: number | null;
  last?: number | null;
  outputs: OutputItem[];
  images: string[];
  outputsDir: string;
  /** A notebook cell's: the stored JSON of what Jupyter saves in it for its latest run. */
  cell?: string | null;
}

/** Asks the server what the view shows for a line (undefined: no server, or it failed). */
export type Ask = (uri: string, line: number) => Promise<OutputsAnswer | undefined>;

/** Kernel HTML larger than this is not put in the panel (the loopback page shows it). */
const HTML_LIMIT = 4 * 1024 * 1024;
const FOLLOW_DELAY_MS = 150;
const OPEN_SETTING = "openOutput";

/** A path inside `dir` (after resolving links), or undefined. */
export function inside(dir: string, file: string): string | undefined {
  try {
    const real = fs.realpathSync(file);
    const root = fs.realpathSync(dir);
    return path.dirname(real) === root ? real : undefined;
  } catch {
    return undefined;
  }
}

export class OutputViews implements vscode.Disposable {
  private readonly panels = new Map<string, vscode.WebviewPanel>();
  private readonly subscriptions: vscode.Disposable[] = [];
  private timer: NodeJS.Timeout | undefined;
  private asked = false;

  constructor(
    private readonly ask: Ask,
    private readonly runs: (document: vscode.TextDocument) => boolean,
  ) {
    this.subscriptions.push(
      vscode.window.onDidChangeTextEditorSelection((event) => this.follow(event.textEditor)),
      vscode.window.onDidChangeActiveTextEditor((editor) => editor && this.follow(editor)),
    );
  }

  dispose(): void {
    clearTimeout(this.timer);
    for (const panel of this.panels.values()) {
      panel.dispose();
    }
    this.subscriptions.forEach((s) => s.dispose());
  }

  /** `runfix: Show Output`: the panel of the editor's folder, showing the cursor's line. */
  async show(editor: vscode.TextEditor): Promise<void> {
    const answer = await this.ask(editor.document.uri.toString(), editor.selection.active.line);
    if (answer) {
      this.render(this.panelFor(answer, true), answer);
    }
  }

  /** `runfix/outputs`: a run gave `uri` new results; `rich`, the lines that showed a plot,
   *  a table… The folder's panel shows them (opened first if the user allows it). */
  async changed(params: { uri: string; rich: number[] }): Promise<void> {
    const editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === params.uri);
    const cursor = editor?.selection.active.line;
    let answer = cursor !== undefined ? await this.ask(params.uri, cursor) : undefined;
    if ((!answer || answer.outputs.length === 0) && params.rich.length > 0) {
      answer = await this.ask(params.uri, params.rich[params.rich.length - 1]);
    }
    if (!answer) {
      return;
    }
    const open = this.panels.get(answer.folder);
    if (open) {
      this.render(open, answer);
    } else if (params.rich.length > 0 && (await this.allowedToOpen())) {
      this.render(this.panelFor(answer, false), answer);
    }
  }

  private async allowedToOpen(): Promise<boolean> {
    const section = vscode.workspace.getConfiguration("runfix");
    const setting = section.get<string>(OPEN_SETTING, "ask");
    if (setting !== "ask") {
      return setting === "always";
    }
    if (this.asked) {
      return false;
    }
    this.asked = true;
    const choice = await vscode.window.showInformationMessage(
      "runfix: a run showed a plot or a table. Show outputs in a panel beside the editor?",
      "Show",
      "Always",
      "Never",
    );
    if (choice === "Always" || choice === "Never") {
      await section.update(OPEN_SETTING, choice.toLowerCase(), vscode.ConfigurationTarget.Global);
    }
    return choice === "Show" || choice === "Always";
  }

  private follow(editor: vscode.TextEditor): void {
    if (!this.runs(editor.document) || this.panels.size === 0) {
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(async () => {
      const answer = await this.ask(editor.document.uri.toString(), editor.selection.active.line);
      const panel = answer && this.panels.get(answer.folder);
      if (answer && panel) {
        this.render(panel, answer);
      }
    }, FOLLOW_DELAY_MS);
  }

  private panelFor(answer: OutputsAnswer, reveal: boolean): vscode.WebviewPanel {
    const existing = this.panels.get(answer.folder);
    if (existing) {
      if (reveal) {
        existing.reveal(vscode.ViewColumn.Beside, true);
      }
      return existing;
    }
    const panel = vscode.window.createWebviewPanel(
      "runfix.output",
      `runfix output · ${path.basename(answer.folder)}`,
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
      {
        enableScripts: true,
        enableCommandUris: false,
        enableForms: false,
        retainContextWhenHidden: true,
        localResourceRoots: [vscode.Uri.file(answer.outputsDir)],
      },
    );
    const nonce = crypto.randomBytes(16).toString("base64");
    panel.webview.html = page(panel.webview.cspSource, nonce);
    panel.onDidDispose(() => this.panels.delete(answer.folder));
    this.panels.set(answer.folder, panel);
    return panel;
  }

  private render(panel: vscode.WebviewPanel, answer: OutputsAnswer): void {
    const webview = panel.webview;
    const image = (file: string | undefined): string | undefined => {
      const real = file && inside(answer.outputsDir, file);
      return real ? webview.asWebviewUri(vscode.Uri.file(real)).toString() : undefined;
    };
    const outputs = answer.outputs.map((o) => ({
      kind: o.kind,
      text: o.text,
      colored: o.colored,
      table: o.table,
      markdown: o.markdown,
      image: image(o.image),
      html: this.kernelHtml(answer.outputsDir, o),
    }));
    const name = path.basename(vscode.Uri.parse(answer.uri).fsPath);
    const where =
      answer.first == null
        ? `${name}: nothing has run here`
        : answer.first === answer.last
          ? `${name}, line ${answer.first + 1}`
          : `${name}, lines ${answer.first + 1}–${(answer.last ?? answer.first) + 1}`;
    void webview.postMessage({
      type: "show",
      where,
      outputs,
      images: answer.images.map(image).filter((u): u is string => u !== undefined),
    });
  }

  private kernelHtml(dir: string, output: OutputItem): string | undefined {
    if (!output.file || !output.file.endsWith(".html")) {
      return undefined;
    }
    const real = inside(dir, output.file);
    try {
      return real && fs.statSync(real).size <= HTML_LIMIT ? fs.readFileSync(real, "utf8") : undefined;
    } catch {
      return undefined;
    }
  }
}

/** The panel's document: a fixed page whose script (the only one allowed) draws what it is
 *  sent with DOM calls — text as text; kernel HTML only inside sandboxed frames. */
function page(cspSource: string, nonce: string): string {
  const policy = [
    "default-src 'none'",
    `img-src ${cspSource} data:`,
    `style-src ${cspSource} 'unsafe-inline'`,
    `script-src 'nonce-${nonce}'`,
    "frame-src 'self' data:",
  ].join("; ");
  return `<!doctype html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${policy}">
<style>
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 12px; }
h1 { font-size: 13px; font-weight: 600; opacity: .8; }
h2 { font-size: 12px; font-weight: 600; opacity: .7; margin-top: 20px; }
pre { font-family: var(--vscode-editor-font-family); font-size: var(--vscode-editor-font-size);
  background: var(--vscode-textCodeBlock-background); padding: 6px 8px; overflow: auto; white-space: pre-wrap; }
figure { margin: 8px 0 14px; } figcaption { font-size: 11px; opacity: .7; }
img { max-width: 100%; background: white; }
iframe { width: 100%; height: 240px; border: 1px solid var(--vscode-panel-border); background: white; resize: vertical; }
.history { display: flex; flex-wrap: wrap; gap: 6px; }
.history img { height: 72px; cursor: pointer; border: 2px solid transparent; }
.history img.chosen { border-color: var(--vscode-focusBorder); }
.compare { display: flex; align-items: center; gap: 8px; }
.none { opacity: .7; }
</style></head>
<body><div id="runfix-view"><p class="none">Run a cell: its plots, tables and text show here.</p></div>
<script nonce="${nonce}">
(() => {
  const view = document.getElementById("runfix-view");
  let images = [];
  let chosen = -1;
  const el = (tag, props = {}, ...children) => {
    const node = document.createElement(tag);
    Object.assign(node, props);
    node.append(...children);
    return node;
  };
  const FRAME_STYLE = "<style>body { font: 13px system-ui, sans-serif; margin: 6px; }" +
    " table { border-collapse: collapse; } th, td { padding: 2px 8px; border: 1px solid #ddd; }</style>";
  const caption = (text) => el("figcaption", { textContent: text.trim() });
  // A sandboxed frame cannot say how tall it is: a table's from its rows (pandas shows
  // up to 60, else 10 and an ellipsis row), anything else a fixed height (resizable).
  function frameHeight(text) {
    const shape = /([\\d,]+)×[\\d,]+/.exec(text);
    if (!shape) return 240;
    const rows = Number(shape[1].replace(/,/g, ""));
    return Math.min(480, 64 + 27 * (rows > 60 ? 11 : rows));
  }
  function output(o) {
    if (o.image) {
      return el("figure", {}, el("img", { src: o.image, alt: o.text.trim() }), caption(o.text));
    }
    if (o.html !== undefined && o.html !== null) {
      const frame = el("iframe", { title: o.text.trim() });
      frame.setAttribute("sandbox", "");
      frame.style.height = frameHeight(o.text) + "px";
      frame.srcdoc = FRAME_STYLE + o.html;
      return el("figure", {}, frame, caption(o.text));
    }
    const pre = el("pre");
    if (o.kind === "text" && o.colored) {
      pre.innerHTML = o.colored; // the server's: escaped text in styled spans
    } else {
      pre.textContent = o.markdown || o.table || o.text;
    }
    return pre;
  }
  function compare() {
    if (chosen < 0 || chosen >= images.length) {
      return [];
    }
    const previous = el("button", { textContent: "‹", title: "newer", onclick: () => choose(chosen - 1) });
    const next = el("button", { textContent: "›", title: "older", onclick: () => choose(chosen + 1) });
    return [el("h2", { textContent: "Compare (" + (chosen + 1) + " of " + images.length + ")" }),
      el("div", { className: "compare" }, previous, el("img", { src: images[chosen], alt: "earlier figure" }), next)];
  }
  function choose(index) {
    chosen = Math.max(0, Math.min(images.length - 1, index));
    draw();
  }
  let last = null;
  function draw() {
    const message = last;
    const parts = [el("h1", { textContent: message.where })];
    if (message.outputs.length === 0) {
      parts.push(el("p", { className: "none", textContent: "No output here." }));
    }
    parts.push(...message.outputs.map(output));
    parts.push(...compare());
    if (images.length > 0) {
      const strip = el("div", { className: "history" });
      images.forEach((src, i) => {
        const thumb = el("img", { src, alt: "figure " + (i + 1), title: "compare", onclick: () => choose(i) });
        if (i === chosen) thumb.className = "chosen";
        strip.append(thumb);
      });
      parts.push(el("h2", { textContent: "Latest images" }), strip);
    }
    view.replaceChildren(...parts);
  }
  window.addEventListener("message", (event) => {
    if (!event.data || event.data.type !== "show") return;
    last = event.data;
    images = event.data.images;
    if (chosen >= images.length) chosen = -1;
    draw();
  });
})();
</script></body></html>`;
}
