#!/usr/bin/env python3
"""`runfix run NB.ipynb --inplace` against `jupyter nbconvert --execute --inplace` (nbclient,
which nbconvert and papermill run notebooks with), on the same notebooks, the same
kernelspec (python3: this interpreter), in one run: the wall time of each, a fresh process
and a fresh kernel each time, as a user runs them from a terminal; medians and the ratio.

Notebooks: 50 cells of small statements (the size the target names), and 10 cells that
plot and print (rich outputs written back). Each tool writes the notebook's outputs in place;
both results are checked to be valid notebooks with every code cell's outputs.

Usage: python scripts/bench_notebook.py [--rounds N] [--cells N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

ROOT = Path(__file__).resolve().parent.parent


def book(first: Any, code: list[str]) -> Any:
    """A python3 notebook: the cell `first`, then a code cell of each of `code`."""
    nb = v4.new_notebook()  # type: ignore[no-untyped-call]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [first, *(v4.new_code_cell(c) for c in code)]  # type: ignore[no-untyped-call]
    return nb


def small(cells: int) -> Any:
    title = v4.new_markdown_cell("# A notebook of small cells")  # type: ignore[no-untyped-call]
    return book(
        title, [f"x{i} = {i} * 2\nprint('cell', {i}, x{i})\nx{i} + 1" for i in range(cells)]
    )


def plots(cells: int) -> Any:
    imports = v4.new_code_cell("import matplotlib.pyplot as plt")  # type: ignore[no-untyped-call]
    return book(
        imports, [f"plt.plot([1, {i}, 2])\nplt.show()\nprint('plot', {i})" for i in range(cells)]
    )


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - began
    if done.returncode not in (0, 1):
        raise SystemExit(f"{command[:4]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return took


def check(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    nbformat.validate(nb)
    missing = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and not c.outputs]
    if missing and missing != [0]:  # (an import shows nothing)
        raise SystemExit(f"{path.name}: code cells without outputs: {missing[:10]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=50)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="runfix-bench-notebook-"))
    (work / "pyproject.toml").write_text(f'[tool.runfix]\npython = "{sys.executable}"\n')
    env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    env["PYTHONPATH"] = str(ROOT)
    books = {f"{args.cells} small cells": small(args.cells), "10 plotting cells": plots(10)}
    try:
        for name, book in books.items():
            ours: list[float] = []
            theirs: list[float] = []
            for n in range(args.rounds):
                for who, times in (("runfix", ours), ("nbclient", theirs)):
                    path = work / f"{who}-{n}.ipynb"
                    nbformat.write(book, path)  # type: ignore[no-untyped-call]
                    if who == "runfix":
                        command = [sys.executable, "-m", "lsp_server", "run", str(path)]
                        command.append("--inplace")
                    else:
                        command = [
                            sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook",
                            "--execute", "--inplace", "--ExecutePreprocessor.kernel_name=python3",
                            str(path),
                        ]  # fmt: skip
                    times.append(timed(command, work, env))
                    check(path)
            a, b = statistics.median(ours), statistics.median(theirs)
            print(
                f"{name}: runfix run --inplace {a:.2f} s, nbconvert --execute --inplace "
                f"{b:.2f} s (medians of {args.rounds}): {a / b:.2f}x"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
