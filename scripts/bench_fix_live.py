"""runfix's fix loop and Generate against a real small model, and the same model given the
whole file once ("paste it into a chat"), on the tasks of `fix_live_tasks.py`.

    .venv/bin/python scripts/bench_fix_live.py [--url URL --model NAME] [--only NAME…]
        [--layout last|slot] [--skip-generate] [--verbose]

Without `--url` it starts Qwen2.5-Coder-0.5B-Instruct on loopback (`scripts/model` sets it
up). Both sides sample alike (temperature 0, seed 0; runfix's retries after a failed
candidate sample warmer, as the loop does) and are bounded alike (model.maxTokens). A task
counts as fixed when the file, run from the top in a fresh interpreter, prints every line
its check expects — a deletion or a silenced error does not. runfix runs as `runfix run
FILE --fix` does (its function, in this process); the paste sends the file(s) and the
traceback once and writes back the file the reply holds. A proxy in front of the model
counts each request's prompt tokens (the endpoint's own count) and the replies that echo
the request (cell markers, runfix's placeholder).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fix_live_tasks import FIX_TASKS, GENERATE_TASKS, FixTask, GenerateTask  # noqa: E402

from executor.text import split_lines  # noqa: E402
from executor.trust import Choice  # noqa: E402
from lsp_server import flow as flow_module  # noqa: E402
from lsp_server.cli.run import HeadlessEditor, project_folder, project_settings, run_file  # noqa: E402
from lsp_server.flow import Flow  # noqa: E402
from lsp_server.prompts import prompt_at  # noqa: E402
from lsp_server.session import Session  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402
from tests.support.real_model import start as start_model  # noqa: E402

SEED = 0
ECHO = re.compile(r"^\s*(#\s*%%|#\s*<<<|#\s*… \(\d+ lines? left out\))", re.M)


# -- the proxy that counts ------------------------------------------------------------------


@dataclass
class Counts:
    prompts: list[int] = field(default_factory=list)
    """Prompt tokens of each request."""
    requests: int = 0
    echoes: int = 0
    """Replies holding a cell marker or runfix's own placeholder."""


class Proxy:
    """Forwards chat completions to the model; counts what each side sent and got."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.counts: dict[str, Counts] = {}
        self.now = "idle"
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("content-length") or 0)))

            def _forward(self, body: bytes | None) -> None:
                request = urllib.request.Request(
                    proxy.upstream + self.path.removeprefix("/v1"),
                    data=body,
                    headers={"content-type": "application/json"},
                    method="POST" if body is not None else "GET",
                )
                try:
                    with urllib.request.urlopen(request, timeout=600) as answer:
                        status, raw = answer.status, answer.read()
                except urllib.error.HTTPError as exc:
                    status, raw = exc.code, exc.read()
                if body is not None and status == 200:
                    proxy.count(raw)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def count(self, raw: bytes) -> None:
        try:
            answer = json.loads(raw)
        except ValueError:
            return
        counts = self.counts.setdefault(self.now, Counts())
        counts.requests += 1
        usage = answer.get("usage") or {}
        if isinstance(usage.get("prompt_tokens"), int):
            counts.prompts.append(usage["prompt_tokens"])
        for choice in answer.get("choices") or []:
            if ECHO.search((choice.get("message") or {}).get("content") or ""):
                counts.echoes += 1

    @contextlib.contextmanager
    def task(self, label: str) -> Iterator[Counts]:
        self.now = label
        self.counts[label] = Counts()
        try:
            yield self.counts[label]
        finally:
            self.now = "idle"

    def close(self) -> None:
        self._httpd.shutdown()


# -- one task's folder, and its check --------------------------------------------------------


def make_folder(base: Path, name: str, files: dict[str, str], model: str) -> Path:
    folder = base / name
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text)
    (folder / "pyproject.toml").write_text(
        f'[tool.runfix]\npython = "{sys.executable}"\n'
        f'model = {{ name = "{model}", stream = false, timeout = 300 }}\n'
    )
    return folder


def check(folder: Path, expect: Sequence[str], file: str = "job.py") -> bool:
    """Whether the file, run from the top in a fresh interpreter, prints what it should."""
    try:
        done = subprocess.run(
            [sys.executable, file], cwd=folder, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and all(re.search(e, done.stdout, re.M) for e in expect)


def traceback_of(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "job.py"], cwd=folder, capture_output=True, text=True, timeout=60
    )
    return done.stderr.strip()


# -- the paste baseline ------------------------------------------------------------------------


PASTE_SYSTEM = "You are a helpful Python programming assistant."
_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[^\n]*\n(.*?)(?:```|\Z)", re.S)
_FILE_LINE = re.compile(r"^#\s*file:\s*(\S+)\s*\n")


def chat(url: str, model: str, messages: list[dict[str, str]], max_tokens: int) -> str:
    body = {
        "model": model,
        "messages": messages,
        "temperature": 0,
        "seed": SEED,
        "max_tokens": max_tokens,
    }
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as answer:
        reply = json.loads(answer.read())
    return str(reply["choices"][0]["message"]["content"] or "")


def paste_fix(url: str, model: str, task: FixTask, folder: Path, max_tokens: int) -> None:
    """The user pastes the file(s) and the traceback into a chat, and copies the answer back."""
    error = traceback_of(folder)
    several = len(task.files) > 1
    shown = "".join(
        f"{name}:\n```python\n{text}```\n\n" for name, text in sorted(task.files.items())
    )
    ask = (
        "Reply with each file you change, complete, in its own ```python block whose first "
        "line is `# file: NAME`."
        if several
        else "Reply with the complete corrected file in one ```python block."
    )
    user = f"My Python {'files' if several else 'file'}:\n\n{shown}Running `python job.py` raised:\n```\n{error}\n```\nFix it. {ask}"
    messages = [{"role": "system", "content": PASTE_SYSTEM}, {"role": "user", "content": user}]
    reply = chat(url, model, messages, max_tokens)
    for block in _BLOCK.findall(reply) or []:
        named = _FILE_LINE.match(block)
        if named and named.group(1) in task.files:
            (folder / named.group(1)).write_text(block[named.end() :])
            continue
        target = "job.py"
        if several:  # no name: the file whose functions it defines
            for name, text in task.files.items():
                defs = re.findall(r"^def (\w+)", text, re.M)
                if name != "job.py" and any(re.search(rf"^def {d}\b", block, re.M) for d in defs):
                    target = name
        (folder / target).write_text(block)
        if not several:
            break


def paste_generate(url: str, model: str, task: GenerateTask, folder: Path, max_tokens: int) -> None:
    prompt = next(line for line in task.source.splitlines() if "# ai:" in line)
    user = (
        f"My Python file:\n```python\n{task.source}```\nWrite the code the comment `{prompt}` "
        "asks for, right under it. Reply with the complete file in one ```python block."
    )
    messages = [{"role": "system", "content": PASTE_SYSTEM}, {"role": "user", "content": user}]
    blocks = _BLOCK.findall(chat(url, model, messages, max_tokens))
    if blocks:
        (folder / "job.py").write_text(max(blocks, key=len))


# -- runfix ----------------------------------------------------------------------------------


def runfix_fix(folder: Path, layout: str) -> None:
    """`runfix run job.py --fix`, in this process (its output is not shown)."""
    made = flow_module.Flow._fixer

    def fixer(self: Flow, *args: Any, **kwargs: Any) -> Any:
        built = made(self, *args, **kwargs)
        built.layout = layout
        return built

    flow_module.Flow._fixer = fixer  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            run_file(folder / "job.py", None, None, fix=True)
    finally:
        flow_module.Flow._fixer = made  # type: ignore[method-assign]


async def _generate(path: Path, line: int) -> tuple[str, bool]:
    """Generate the body of the prompt on `line` as the editor's Generate does; the text
    after, and whether the prompt still holds its body (not split off by a new cell)."""
    folder = project_folder(path)
    settings = project_settings(folder, None)
    lines = split_lines(path.read_text())
    editor = HeadlessEditor(path.name, path, folder, lines)

    async def read(_: Path) -> Settings:
        return settings

    session = Session(read, editor.kernel_state, decided=Choice.TRUST)
    flow = Flow(session, editor)
    try:
        await flow.generate(editor.uri, line, False, asyncio.Event())
    finally:
        await session.close()
    prompt = prompt_at(editor.lines, line, settings.prompt_markers)
    whole = prompt is not None and prompt.has_body
    return "".join(editor.lines), whole


def runfix_generate(folder: Path, task: GenerateTask) -> bool:
    path = folder / "job.py"
    line = next(i for i, text in enumerate(task.source.splitlines()) if "# ai:" in text)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        text, whole = asyncio.run(_generate(path, line))
    path.write_text(text)
    return whole


# -- the table ----------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    where: str
    ok: bool
    seconds: float
    tokens: int
    """Prompt tokens, all its requests together."""
    requests: int
    echoes: int


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def summary(label: str, rows: Sequence[Row]) -> str:
    done = sum(r.ok for r in rows)
    rate = 100 * done / len(rows) if rows else 0.0
    return (
        f"{label:<26} {done:>3}/{len(rows):<3} {rate:5.1f} %   median {median([r.seconds for r in rows]):5.1f} s"
        f"   prompt tokens median {median([r.tokens for r in rows]):6.0f}"
        f"   requests {sum(r.requests for r in rows):>3}   echoing replies {sum(r.echoes for r in rows)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an OpenAI-compatible endpoint (default: start Qwen)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--only", nargs="*", help="task names")
    parser.add_argument("--layout", default="last", choices=["last", "slot"])
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument("--skip-paste", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-fix-live-") as tmp:
        base = Path(tmp)
        server = None
        url = args.url
        if url is None:
            print("starting Qwen2.5-Coder-0.5B-Instruct on loopback (scripts/model)", flush=True)
            server = start_model(base / "model.log")
            url = server.url
        proxy = Proxy(url)
        os.environ.update(
            {
                "OPENAI_BASE_URL": proxy.url,
                "RUNFIX_MODEL_TEMPERATURE": "0",
                "RUNFIX_MODEL_SEED": str(SEED),
                "RUNFIX_MODEL_MAX_TOKENS": str(args.max_tokens),
            }
        )
        try:
            return _bench(args, base, proxy)
        finally:
            proxy.close()
            if server is not None:
                server.stop()


def _bench(args: argparse.Namespace, base: Path, proxy: Proxy) -> int:
    fixes = [t for t in FIX_TASKS if not args.only or t.name in args.only]
    generates = [t for t in GENERATE_TASKS if not args.only or t.name in args.only]
    ours: list[Row] = []
    pasted: list[Row] = []
    for task in fixes:
        for side, rows in (("runfix", ours), ("paste", pasted)):
            if side == "paste" and args.skip_paste:
                continue
            folder = make_folder(base / side, task.name, task.files, args.model)
            began = time.perf_counter()
            with proxy.task(f"{side}:{task.name}") as counts:
                if side == "runfix":
                    runfix_fix(folder, args.layout)
                else:
                    paste_fix(proxy.url, args.model, task, folder, args.max_tokens)
            row = Row(
                task.name,
                task.where,
                check(folder, task.expect),
                time.perf_counter() - began,
                sum(counts.prompts),
                counts.requests,
                counts.echoes,
            )
            rows.append(row)
            if args.verbose:
                print(
                    f"  {side:<6} {task.where:<10} {task.name:<22} {'fixed' if row.ok else '-':<6} {row.seconds:5.1f} s {row.tokens:5d} tokens",
                    flush=True,
                )
    gen_ours: list[Row] = []
    gen_pasted: list[Row] = []
    split = 0
    for gtask in [] if args.skip_generate else generates:
        for side, rows in (("runfix", gen_ours), ("paste", gen_pasted)):
            if side == "paste" and args.skip_paste:
                continue
            folder = make_folder(
                base / f"gen-{side}", gtask.name, {"job.py": gtask.source}, args.model
            )
            began = time.perf_counter()
            with proxy.task(f"gen-{side}:{gtask.name}") as counts:
                if side == "runfix":
                    split += not runfix_generate(folder, gtask)
                else:
                    paste_generate(proxy.url, args.model, gtask, folder, args.max_tokens)
            row = Row(
                gtask.name,
                "generate",
                check(folder, gtask.expect),
                time.perf_counter() - began,
                sum(counts.prompts),
                counts.requests,
                counts.echoes,
            )
            rows.append(row)
            if args.verbose:
                print(
                    f"  {side:<6} generate   {gtask.name:<22} {'ok' if row.ok else '-':<6} {row.seconds:5.1f} s {row.tokens:5d} tokens",
                    flush=True,
                )

    print(f"\nfix tasks ({len(fixes)}; layout {args.layout}; temperature 0, seed {SEED}):")
    for label, rows in (("runfix run --fix", ours), ("paste (whole file once)", pasted)):
        if rows:
            print("  " + summary(label, rows))
    for where in ("other cell", "module", "cell"):
        for label, rows in (("runfix", ours), ("paste", pasted)):
            picked = [r for r in rows if r.where == where]
            if picked:
                print("  " + summary(f"{label}, bug in {where}", picked))
    if ours and pasted:
        ratio = sum(r.ok for r in ours) / max(sum(r.ok for r in pasted), 1)
        print(f"  runfix fixed {ratio:.2f}× as many as the paste")
    if gen_ours:
        print(f"\ngenerate tasks ({len(gen_ours)}):")
        for label, rows in (("runfix Generate", gen_ours), ("paste (whole file once)", gen_pasted)):
            if rows:
                print("  " + summary(label, rows))
        print(f"  prompts split from their body by a generated cell marker: {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
