"""`runfix history`: a folder's recent runs from its run record, as lines or JSON."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from lsp_server.cli.notebook_file import NotebookFile
from lsp_server.record.store import (
    FILE,
    NotARecord,
    RecordedRun,
    one_based,
    open_for_reading,
    recent,
    record_folder,
)
from lsp_server.text.notebooks import Notebook


def line_of(run: RecordedRun, folder: Path | None) -> str:
    """One run as a line: when, where, who, how it ended, its figures, what it showed."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started))
    path = Path(run.path)
    lines = _lines(path, run.first, run.last, run.code)
    if folder is not None and path.is_relative_to(folder):
        path = path.relative_to(folder)
    said = run.said
    asked = f" · {run.model.text}" if run.model is not None else ""
    return f"#{run.id} {when} {path}:{lines} {run.origin} {run.status} {run.figures}{asked}" + (
        f"  {said}" if said else ""
    )


@functools.lru_cache(maxsize=16)
def _layout(path: Path) -> tuple[Notebook, list[tuple[int, list[str]]]] | None:
    """A notebook's cells as they are now, and its code cells' numbers (from 1, as it
    shows them) and lines (None: not a notebook runfix can read)."""
    if path.suffix != ".ipynb":
        return None
    try:
        notebook = NotebookFile.read(path)
    except (OSError, ValueError):
        return None
    cells = enumerate(notebook.notebook.cells, 1)
    code = [(n, str(c.source).splitlines()) for n, c in cells if c.cell_type == "code"]
    return notebook.layout, code


def _in_cell(cells: list[tuple[int, list[str]]], code: str) -> tuple[int, int] | None:
    """The one code cell holding `code`'s lines, and the line (from 1) they start on there.
    A run's lines are its editor's document's (Neovim's holds the markdown cells too,
    VS Code's does not): the code a run ran is what says its cell wherever it ran."""
    wanted = code.splitlines()
    found = [
        (number, start + 1)
        for number, lines in cells
        for start in range(len(lines) - len(wanted) + 1)
        if wanted and lines[start : start + len(wanted)] == wanted
    ]
    return found[0] if len(found) == 1 else None


def _lines(path: Path, first: int, last: int, code: str = "") -> str:
    """Where a run was, as `path:` goes on: lines (from 1), or in a notebook its cells and
    their lines (`cell 4:2-5`), as the notebook's cells stand now."""
    found = _layout(path)
    if found is None:
        return f"{first + 1}" if first == last else f"{first + 1}-{last + 1}"
    layout, cells = found
    held = _in_cell(cells, code)
    if held is not None:
        number, line = held
        span = f"{line}" if first == last else f"{line}-{line + last - first}"
        return f"cell {number}:{span}"
    start, end = layout.name(first), layout.name(last)  # "cell 4, line 2"
    if start == end:
        return start.replace(", line ", ":")
    if start.split(",")[0] == end.split(",")[0]:
        return start.replace(", line ", ":") + "-" + end.rsplit(" ", 1)[-1]
    return start.replace(", line ", ":") + "-" + end.replace(", line ", ":")


def shown_in_full(run: RecordedRun, folder: Path | None) -> str:
    """One run as `--show N` prints it: its line, the code that ran, what it showed and
    raised, and what the model was asked and answered where the model wrote the code."""
    out = [line_of(run, folder)]
    if run.fix_of is not None:
        out.append(f"a fix attempt for run #{run.fix_of}")
    out += ["", "code:", *_indented(run.code)]
    for output in run.outputs:
        if output.text:  # (a notebook cell's saved outputs have none: `record.notebooks`)
            out.append(f"line {output.line + 1}: {output.text}")
    if run.error:
        out += ["", "raised:", *_indented(run.error)]
    if run.model is not None:
        out += ["", run.model.said]
        if run.model.request:
            out += ["", "asked (as sent, secrets hidden):", *_indented(run.model.request)]
    return "\n".join(out)


def _indented(text: str) -> list[str]:
    return ["  " + line for line in text.rstrip("\n").split("\n")]


def command(args: argparse.Namespace) -> int:
    return show_history(args.file, args.json, args.limit, args.show)


def show_history(target: Path | None, as_json: bool, limit: int, show: int | None = None) -> int:
    """Print the latest runs (of `target` if it is a file) of the record above it; with
    `show`, that run in full."""
    start = (target or Path.cwd()).resolve()
    folder = record_folder(start)
    if folder is None:
        print(f"runfix: no run record at or above {start} (runs are recorded in .runfix/runs.db)")
        return 1
    try:
        db = open_for_reading(folder)
        if db is None:
            return 1
        try:
            path = str(start) if start.is_file() else None
            runs = recent(db, path, limit, show)
        finally:
            db.close()
    except (NotARecord, sqlite3.DatabaseError) as exc:
        print(f"runfix: {folder / FILE} cannot be read: {exc}", file=sys.stderr)
        return 1
    if show is not None and not runs:
        print(f"runfix: no run #{show} in {folder / FILE}", file=sys.stderr)
        return 1
    try:
        if as_json:
            print(json.dumps([one_based(r) for r in runs], ensure_ascii=False, indent=1))
        elif show is not None:
            print(shown_in_full(runs[0], folder))
        else:
            for run in runs:
                print(line_of(run, folder))
        sys.stdout.flush()
    except BrokenPipeError:  # `runfix history | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
