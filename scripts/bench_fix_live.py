"""runfix's fix loop and Generate against a real small model, and the same model given the
whole file once ("paste it into a chat"), on the tasks of `fix_live_tasks.py`.

    .venv/bin/python scripts/bench_fix_live.py [--url URL --model NAME] [--only NAME…]
        [--needs model|offline] [--fresh] [--layout first|last|slot] [--skip-generate]
        [--skip-paste] [--verbose] [--show] [--without evidence|narrow|stop|cause …]
        [--evidence facts|full] [--evidence-after N]

Without `--url` it starts Qwen2.5-Coder-0.5B-Instruct on loopback (`scripts/model` sets it
up). Both sides sample alike (temperature 0, seed 0; runfix's retries after a failed
candidate sample warmer, as the loop does) and are bounded alike (model.maxTokens). A task
counts as fixed when the file, run from the top in a fresh interpreter, prints every line
its check expects — a deletion or a silenced error does not. runfix runs as `runfix run
FILE --fix` does (its function, in this process); the paste sends the file(s) and the
traceback once and writes back the file the reply holds. A proxy in front of the model
counts each request's prompt tokens (the endpoint's own count) and the replies that echo
the request (cell markers, runfix's placeholder). "Fixed with no model asked" counts the
tasks runfix fixed with Python's own suggestion (or a column the kernel has) before any
request: a typo fixed offline, proven the same way.

Where the time goes: each task's wall time, the part of it spent waiting for the model
(every request, reading the prompt and writing the answer, as the proxy saw it) and the
rest (kernel start, runs, checks), with the prompt and answer tokens. Each part of the fix
loop can be left out (`--without`) or said another way (`--evidence`, `--evidence-after`) to
measure what it does on the same tasks with the same model; `--show` prints each request
and its answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fix_kept_tasks import KEPT_FIX_TASKS, KEPT_GENERATE_TASKS  # noqa: E402
from fix_live_tasks import FIX_TASKS, GENERATE_TASKS, FixTask, GenerateTask  # noqa: E402

from executor.text import split_lines  # noqa: E402
from executor.trust import Choice  # noqa: E402
from lsp_server.cli.run import HeadlessEditor, project_folder, project_settings, run_file  # noqa: E402
from lsp_server.fix.evidence import STYLES  # noqa: E402
from lsp_server.flow import Flow  # noqa: E402
from lsp_server.model.context import LAYOUTS  # noqa: E402
from lsp_server.session import Session  # noqa: E402
from lsp_server.settings import Settings  # noqa: E402
from lsp_server.text.prompts import prompt_at  # noqa: E402
from lsp_server.verbs.fix import FixFlow  # noqa: E402
from tests.support.real_model import Proxy, Seen, chat  # noqa: E402
from tests.support.real_model import start as start_model  # noqa: E402

SEED = 0
ECHO = re.compile(r"^\s*(#\s*%%|#\s*<<<|#\s*… \(\d+ lines? left out\))", re.M)


def echoes(seen: Seen) -> int:
    """Replies holding a cell marker or runfix's own placeholder (an echo of the request)."""
    return sum(bool(ECHO.search(reply)) for reply in seen.replies)


# -- one task's folder, and its check --------------------------------------------------------


def make_folder(
    base: Path,
    name: str,
    files: dict[str, str],
    model: str,
    attempts: int | None = None,
    candidates: int | None = None,
) -> Path:
    folder = base / name
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text)
    more = f", candidates = {candidates}" if candidates else ""
    (folder / "pyproject.toml").write_text(
        f'[tool.runfix]\npython = "{sys.executable}"\n'
        f'model = {{ name = "{model}", stream = false, timeout = 300, temperature = 0{more} }}\n'
        + (f"fix = {{ maxAttempts = {attempts} }}\n" if attempts is not None else "")
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
    user = (
        f"My Python {'files' if several else 'file'}:\n\n{shown}Running `python job.py` "
        f"raised:\n```\n{error}\n```\nFix it. {ask}"
    )
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


WITHOUT = ("evidence", "narrow", "stop", "cause")
"""The parts of the fix loop `--without` leaves out, to measure what each does: the kernel's
evidence in the request, the narrower request after an answer that changed nothing, the
end after two answers alike, the fix moved to the function a None came from."""


async def _no_evidence(ename: str, line: int) -> None:
    return None


def as_notebook(folder: Path) -> Path:
    """job.py as job.ipynb: each `# %%` cell a code cell (what runs before the first marker
    too); the notebook's path."""
    import nbformat
    from nbformat import v4

    cells: list[list[str]] = [[]]
    for line in (folder / "job.py").read_text().splitlines(keepends=True):
        if line.startswith("# %%"):
            cells.append([])
        else:
            cells[-1].append(line)
    book = v4.new_notebook()  # type: ignore[no-untyped-call]
    book.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    book.cells = [v4.new_code_cell("".join(c).rstrip("\n")) for c in cells if "".join(c).strip()]  # type: ignore[no-untyped-call]
    path = folder / "job.ipynb"
    nbformat.write(book, path)  # type: ignore[no-untyped-call]
    return path


def from_notebook(folder: Path) -> None:
    """job.py made again of job.ipynb's code cells (what `check` runs)."""
    import nbformat

    book = nbformat.read(folder / "job.ipynb", as_version=4)  # type: ignore[no-untyped-call]
    code = [c.source for c in book.cells if c.cell_type == "code"]
    (folder / "job.py").write_text("".join(f"# %%\n{source}\n" for source in code))


def runfix_fix(
    folder: Path,
    layout: str,
    without: Sequence[str] = (),
    style: str = "facts",
    after: int = 0,
    notebook: bool = False,
) -> None:
    """`runfix run job.py --fix` (`notebook`: job.py as job.ipynb, written back as job.py
    after), in this process (its output is not shown)."""
    made = FixFlow._fixer

    def fixer(self: FixFlow, *args: Any, **kwargs: Any) -> Any:
        built = made(self, *args, **kwargs)
        built.layout = layout
        built.evidence_style, built.evidence_after = style, after
        if "evidence" in without:
            built.ports.evidence = _no_evidence  # type: ignore[method-assign]
        if "narrow" in without:
            built.narrow = False
        if "stop" in without:
            built.stop_alike = False
        if "cause" in without:
            built.retarget = None
        return built

    FixFlow._fixer = fixer  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if notebook:
                run_file(as_notebook(folder), None, None, fix=True)
                from_notebook(folder)
            else:
                run_file(folder / "job.py", None, None, fix=True)
    finally:
        FixFlow._fixer = made  # type: ignore[method-assign]


async def _generate(path: Path, source: str, line: int) -> tuple[str, bool]:
    """Generate the body of the prompt on `line` as the editor's Generate does; the text
    after, and whether the prompt still holds its body (not split off by a new cell)."""
    folder = project_folder(path)
    settings = project_settings(folder, None)
    lines = split_lines(source)
    editor = HeadlessEditor(path.name, path, folder, lines)

    async def read(_: Path) -> Settings:
        return settings

    session = Session(read, editor.kernel_state, decided=Choice.TRUST)
    flow = Flow(session, editor)
    try:
        where = await flow.where(editor.uri)
        await flow.generator.generate(where, line, False, asyncio.Event())
    finally:
        await flow.close()
    prompt = prompt_at(editor.lines, line, settings.prompt_markers)
    whole = prompt is not None and prompt.has_body
    return "".join(editor.lines), whole


def runfix_generate(folder: Path, task: GenerateTask) -> bool:
    path = folder / "job.py"
    line = next(i for i, text in enumerate(task.source.splitlines()) if "# ai:" in text)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        text, whole = asyncio.run(_generate(path, task.source, line))
    path.write_text(text)
    return whole


# -- the table ----------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    where: str
    needs: str
    """model | offline (`FixTask.needs`; generate tasks: model)"""
    fresh: bool
    ok: bool
    seconds: float
    tokens: int
    """Prompt tokens, all its requests together."""
    requests: int
    echoes: int
    model: float = 0.0
    """Seconds some request was waiting for the model (reading and writing; concurrent
    requests counted once)."""
    answer_tokens: int = 0
    claimed: bool = False
    """The side wrote a fix (runfix: called it fixed; the paste: its reply's file): what
    precision counts, right or not."""


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def _where_is(where: str, row: Row) -> bool:
    return row.where == where


def _needs_model(row: Row) -> bool:
    return row.needs == "model"


def _offline(row: Row) -> bool:
    return row.needs == "offline"


def _fresh(row: Row) -> bool:
    return row.fresh and row.needs == "model"


def ratios(group: str, ours: Sequence[Row], pasted: Sequence[Row]) -> str:
    """runfix against the paste on the same tasks: how many more it fixed, and its time."""
    fixed = sum(r.ok for r in ours) / max(sum(r.ok for r in pasted), 1)
    took = median([r.seconds for r in ours]) / max(median([r.seconds for r in pasted]), 1e-9)
    return f"  → {group}: runfix fixed {fixed:.2f}× the paste, in {took:.2f}× its median time"


def precision(rows: Sequence[Row]) -> str:
    """Right among the fixes written: `7/8 88 %` (a fix is right when the file then prints
    what the task expects)."""
    claimed = [r for r in rows if r.claimed]
    right = sum(r.ok for r in claimed)
    share = 100 * right / len(claimed) if claimed else 100.0
    return f"{right}/{len(claimed)} {share:3.0f} %"


def summary(label: str, rows: Sequence[Row], echo: bool = True) -> str:
    done = sum(r.ok for r in rows)
    rate = 100 * done / len(rows) if rows else 0.0
    seconds = median([r.seconds for r in rows])
    model = median([r.model for r in rows])
    rest = median([r.seconds - r.model for r in rows])
    tokens = median([r.tokens for r in rows])
    answer = median([r.answer_tokens for r in rows])
    return (
        f"{label:<36} {done:>3}/{len(rows):<3} {rate:5.1f} %   precision {precision(rows)}"
        f"   median {seconds:5.1f} s"
        f" (model {model:4.1f} s, the rest {rest:4.1f} s)"
        f"   tokens median {tokens:5.0f} prompt + {answer:4.0f} answer"
        f"   requests {sum(r.requests for r in rows):>3}"
        f"   fixed with no model asked {sum(r.ok and not r.requests for r in rows)}"
        + (f"   echoing replies {sum(r.echoes for r in rows)}" if echo else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", help="an OpenAI-compatible endpoint (default: start Qwen)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--only", nargs="*", help="task names")
    parser.add_argument("--needs", choices=["model", "offline"], help="only these fix tasks")
    parser.add_argument("--fresh", action="store_true", help="only the fresh fix tasks")
    parser.add_argument("--layout", default="first", choices=list(LAYOUTS))
    parser.add_argument(
        "--without", nargs="*", default=[], choices=WITHOUT, help="parts of the loop left out"
    )
    parser.add_argument("--evidence", default="facts", choices=STYLES, help="how it is said")
    parser.add_argument(
        "--evidence-after", type=int, default=0, help="answers before a request carries it"
    )
    parser.add_argument(
        "--notebooks", action="store_true", help="run the fix tasks as notebooks (.ipynb) too"
    )
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument("--skip-paste", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument(
        "--attempts", type=int, help="candidates runfix tries (fix.maxAttempts; default 3)"
    )
    parser.add_argument(
        "--candidates",
        type=int,
        nargs="*",
        default=[0],
        help="runfix's model.candidates, one side each (0: the setting's default)",
    )
    parser.add_argument(
        "--tasks",
        default="project",
        choices=["project", "kept", "both"],
        help="the project's tasks, the ones kept aside for issue 69 (scripts/fix_kept_tasks.py), "
        "or both (each reported alone too)",
    )
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--show", action="store_true", help="print each request's user message and its reply"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="write each fix runfix accepted from the model (its code, the file it went into, "
        "the folder's modules) to this JSON file: what scripts/bench_safety.py scans",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-fix-live-") as tmp:
        base = Path(tmp)
        server = None
        url = args.url
        if url is None:
            print("starting Qwen2.5-Coder-0.5B-Instruct on loopback (scripts/model)", flush=True)
            server = start_model(base / "model.log")
            url, args.model = server.url, server.name
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
            bench = Bench(args, base, proxy)
            report(args, bench)
            if args.keep is not None:
                args.keep.write_text(json.dumps(bench.kept, indent=1))
                print(f"kept {len(bench.kept)} accepted model fixes in {args.keep}")
        finally:
            proxy.close()
            if server is not None:
                server.stop()
    return 0


def accepted(folder: Path, name: str) -> list[dict[str, Any]]:
    """The model-written fix that ran clean and was kept in `folder` (its run record's
    last clean run of the model's code), with the file it is in and the folder's modules."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(folder / ".runfix" / "runs.db")) as db:
        row = db.execute(
            "SELECT code, path FROM runs WHERE origin = 'model' AND status = 'ok' "
            "ORDER BY id DESC LIMIT 1"
        ).fetchone()
    if row is None:
        return []  # fixed offline: runfix's own code, not the model's
    modules = sorted(p.stem for p in folder.glob("*.py"))
    document = (folder / "job.py").read_text()
    return [{"task": name, "code": row[0], "document": document, "modules": modules}]


def generated(folder: Path, name: str, source: str) -> dict[str, Any]:
    """The code Generate wrote into `folder`'s job.py (the lines it added to `source`)."""
    import difflib

    document = (folder / "job.py").read_text()
    added = difflib.ndiff(source.splitlines(True), document.splitlines(True))
    code = "".join(line[2:] for line in added if line.startswith("+ "))
    modules = sorted(p.stem for p in folder.glob("*.py"))
    return {"task": f"generate: {name}", "code": code, "document": document, "modules": modules}


@dataclass
class Bench:
    args: argparse.Namespace
    base: Path
    proxy: Proxy
    kept: list[dict[str, Any]] = field(default_factory=list)
    candidates: int | None = None
    """model.candidates of the runfix side under way (None: the default)."""

    def task(
        self,
        side: str,
        name: str,
        where: str,
        files: dict[str, str],
        expect: Sequence[str],
        do: Callable[[Path], object],
        needs: str = "model",
        fresh: bool = False,
    ) -> Row:
        """One side's go at one task, checked and counted."""
        folder = make_folder(
            self.base / side, name, files, self.args.model, self.args.attempts, self.candidates
        )
        seen = self.proxy.watch()
        began = time.perf_counter()
        do(folder)
        claimed = any((folder / n).read_text() != text for n, text in files.items())
        ok = check(folder, expect)
        took = time.perf_counter() - began
        if ok and side.startswith("runfix") and self.args.keep is not None:
            self.kept.extend(accepted(folder, name))
        if ok and side == "gen-runfix" and self.args.keep is not None:
            self.kept.append(generated(folder, name, files["job.py"]))
        row = Row(
            name, where, needs, fresh, ok, took, sum(seen.prompt_tokens), len(seen.requests),
            echoes(seen), seen.waited(), sum(seen.answer_tokens), claimed,
        )  # fmt: skip
        if self.args.show:
            for request, reply in zip(seen.requests, seen.replies, strict=False):
                asked = "\n".join(
                    m["content"] for m in request.get("messages", []) if m["role"] == "user"
                )
                print(f"---- {side} {name}: asked\n{asked}\n---- answered\n{reply}\n", flush=True)
        if self.args.verbose:
            said = "done" if row.ok else ("WRONG" if row.claimed else "-")
            print(
                f"  {side:<12} {where:<10} {name:<28} {said:<5} {row.seconds:5.1f} s "
                f"(model {row.model:5.1f} s, {row.requests} requests) {row.tokens:5d}+"
                f"{row.answer_tokens} tokens",
                flush=True,
            )
        return row


def _generate_kept(task: GenerateTask, splits: list[bool], folder: Path) -> None:
    splits.append(not runfix_generate(folder, task))


def _paste_fix(url: str, model: str, task: FixTask, most: int, folder: Path) -> None:
    paste_fix(url, model, task, folder, most)


def _runfix_fix(
    layout: str, without: Sequence[str], style: str, after: int, notebook: bool, folder: Path
) -> None:
    runfix_fix(folder, layout, without, style, after, notebook)


def _paste_generate(url: str, model: str, task: GenerateTask, most: int, folder: Path) -> None:
    paste_generate(url, model, task, folder, most)


def runfix_sides(
    args: argparse.Namespace, bench: Bench, fixes: Sequence[FixTask], kept_names: set[str]
) -> dict[int, list[Row]]:
    """runfix's go at each task, once for each `--candidates`."""
    sides: dict[int, list[Row]] = {}
    for n in args.candidates:
        bench.candidates = n or None
        sides[n] = [
            bench.task(
                f"runfix-{n}",
                t.name,
                t.where,
                t.files,
                t.expect,
                functools.partial(
                    _runfix_fix,
                    args.layout,
                    args.without,
                    args.evidence,
                    args.evidence_after,
                    False,
                ),
                t.needs,
                t.fresh or t.name in kept_names,
            )
            for t in fixes
        ]
    bench.candidates = None
    return sides


def print_sides(
    args: argparse.Namespace, sides: dict[int, list[Row]], kept_names: set[str]
) -> None:
    for n, rows in sides.items():
        print("  " + summary(f"runfix run --fix, candidates {n or 'default'}", rows))
        if args.tasks == "both":
            for label, keep in (("the project's", False), ("kept aside", True)):
                picked = [r for r in rows if (r.name in kept_names) == keep]
                print("    " + summary(f"{label} tasks", picked))


def print_ratios(
    args: argparse.Namespace, sides: dict[int, list[Row]], pasted: list[Row], kept_names: set[str]
) -> None:
    for n, rows in sides.items():
        print("  " + ratios(f"all, candidates {n or 'default'}", rows, pasted))
        if args.tasks == "both":
            for label, keep_it in (("the project's", False), ("kept aside", True)):
                mine = [r for r in rows if (r.name in kept_names) == keep_it]
                theirs = [r for r in pasted if (r.name in kept_names) == keep_it]
                print("  " + summary(f"paste, {label} tasks", theirs, echo=False))
                print("  " + ratios(f"{label}, candidates {n or 'default'}", mine, theirs))


def report(args: argparse.Namespace, bench: Bench) -> None:
    pool = {"project": FIX_TASKS, "kept": KEPT_FIX_TASKS, "both": FIX_TASKS + KEPT_FIX_TASKS}
    kept_names = {t.name for t in KEPT_FIX_TASKS} | {g.name for g in KEPT_GENERATE_TASKS}
    fixes = [
        t
        for t in pool[args.tasks]
        if (not args.only or t.name in args.only)
        and (args.needs is None or t.needs == args.needs)
        and (t.fresh or not args.fresh)
    ]
    generating = {
        "project": GENERATE_TASKS,
        "kept": KEPT_GENERATE_TASKS,
        "both": GENERATE_TASKS + KEPT_GENERATE_TASKS,
    }[args.tasks]
    generates = [t for t in generating if not args.only or t.name in args.only]
    if args.skip_generate:
        generates = []
    url = bench.proxy.url
    sides = runfix_sides(args, bench, fixes, kept_names)
    ours = sides[args.candidates[0]]
    in_notebooks = [
        bench.task(
            "runfix-nb",
            t.name,
            t.where,
            t.files,
            t.expect,
            functools.partial(
                _runfix_fix, args.layout, args.without, args.evidence, args.evidence_after, True
            ),
            t.needs,
            t.fresh or t.name in kept_names,
        )
        for t in (fixes if args.notebooks else [])
    ]
    pasted = (
        []
        if args.skip_paste
        else [
            bench.task(
                "paste",
                t.name,
                t.where,
                t.files,
                t.expect,
                functools.partial(_paste_fix, url, args.model, t, args.max_tokens),
                t.needs,
                t.fresh or t.name in kept_names,
            )
            for t in fixes
        ]
    )
    splits: list[bool] = []
    gen_ours = [
        bench.task(
            "gen-runfix",
            g.name,
            "generate",
            {"job.py": g.source},
            g.expect,
            functools.partial(_generate_kept, g, splits),
        )
        for g in generates
    ]
    gen_pasted = (
        []
        if args.skip_paste
        else [
            bench.task(
                "gen-paste",
                g.name,
                "generate",
                {"job.py": g.source},
                g.expect,
                functools.partial(_paste_generate, url, args.model, g, args.max_tokens),
            )
            for g in generates
        ]
    )
    left_out = f"; without {', '.join(args.without)}" if args.without else ""
    left_out += f"; evidence {args.evidence}" if args.evidence != "facts" else ""
    left_out += f" after {args.evidence_after} answers" if args.evidence_after else ""
    print(
        f"\nfix tasks ({len(fixes)}; layout {args.layout}{left_out}; temperature 0, seed {SEED}):"
    )
    print_sides(args, sides, kept_names)
    if in_notebooks:
        print(
            "  " + summary("runfix run NB.ipynb --fix (the same tasks as notebooks)", in_notebooks)
        )
    if pasted:
        print("  " + summary("paste (whole file once)", pasted, echo=False))
    groups: list[tuple[str, Callable[[Row], bool]]] = [
        (f"bug in {where}", functools.partial(_where_is, where))
        for where in ("other cell", "module", "cell")
    ]
    groups += [
        ("needs a model", _needs_model),
        ("offline (Python names it)", _offline),
        ("fresh, needs a model", _fresh),
    ]
    for group, keep in groups:
        for label, rows in (("runfix", ours), ("paste", pasted)):
            picked = [r for r in rows if keep(r)]
            if picked:
                print("  " + summary(f"{label}, {group}", picked, label == "runfix"))
        if ours and pasted:
            mine, theirs = [r for r in ours if keep(r)], [r for r in pasted if keep(r)]
            print("  " + ratios(group, mine, theirs))
    if ours and pasted:
        print_ratios(args, sides, pasted, kept_names)
    if gen_ours:
        print(f"\ngenerate tasks ({len(gen_ours)}):")
        print("  " + summary("runfix Generate", gen_ours))
        if gen_pasted:
            print("  " + summary("paste (whole file once)", gen_pasted, echo=False))
            print("  " + ratios("generate", gen_ours, gen_pasted))
        print(f"  prompts split from their body by a generated cell marker: {sum(splits)}")


if __name__ == "__main__":
    sys.exit(main())
