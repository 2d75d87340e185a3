"""`runfix run NB.ipynb` (issue 49, 5): a notebook runs as its code cells, its results named
by cell; `--inplace` writes each cell's outputs into it (text, values, images, errors, as
Jupyter keeps them), `--fix` its fixed cells; what is written is a valid notebook, and
whatever runfix did not change stays as it was."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat import v4

from tests.support.model_server import ModelServer, code

RUNFIX = [sys.executable, "-m", "lsp_server"]


def runfix(*args: str | Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **env}
    return subprocess.run(
        [*RUNFIX, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def notebook(path: Path, *cells: Any, **metadata: Any) -> Path:
    nb = v4.new_notebook()
    nb.cells = list(cells)
    nb.metadata.update(
        metadata
        or {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nbformat.write(nb, path)
    return path


def md(text: str) -> Any:
    return v4.new_markdown_cell(text)


def cell(text: str, **more: Any) -> Any:
    return v4.new_code_cell(text, **more)


def test_a_notebook_runs_its_cells_and_inplace_writes_their_outputs(folder: Path) -> None:
    kept = {"output_type": "stream", "name": "stdout", "text": "from before\n"}
    path = notebook(
        folder / "sales.ipynb",
        md("# Sales\nWith an ![image](attachment:x.png)"),
        cell("prices = [3, 4, 5]\nprint('n =', len(prices))"),
        cell("import matplotlib.pyplot as plt\nplt.plot(prices)\nplt.show()"),
        cell("total = sum(prices)\ntotal"),
        cell("def mean(xs):\n    return sum(xs) / count"),
        cell("mean(prices)"),
        cell("print('never reached')", outputs=[nbformat.from_dict(kept)], execution_count=7),
    )
    before = nbformat.read(path, as_version=4)
    done = runfix("run", path, "--inplace", cwd=folder)
    assert done.returncode == 1, done.stderr  # a cell raised
    out = done.stdout.splitlines()
    assert f"{path}:cell 2:2:1: note: n = 3" in out  # cells counted as the notebook shows them
    assert f"{path}:cell 4:2:1: note: 12" in out
    assert f"{path}:cell 5:2:5: error: NameError: name 'count' is not defined" in out
    assert f"{path}:cell 6:1:1: note: called from here" in out
    assert f"{path}: note: wrote the outputs of 5 cells" in out

    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)
    title, printed, plot, value, defined, raised, later = after.cells
    assert title == before.cells[0]  # markdown as it was
    assert [c.id for c in after.cells] == [c.id for c in before.cells]
    assert after.metadata == before.metadata
    assert [(o.output_type, o.text) for o in printed.outputs] == [("stream", "n = 3\n")]
    figure = [o for o in plot.outputs if o.output_type == "display_data"]
    assert base64.b64decode(figure[0].data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    [result] = value.outputs
    assert (result.output_type, result.data["text/plain"]) == ("execute_result", "12")
    assert result.execution_count == value.execution_count == 3  # the third cell run
    assert defined.outputs == []
    [error] = raised.outputs
    assert (error.output_type, error.ename) == ("error", "NameError")
    assert later.outputs == before.cells[6].outputs and later.execution_count == 7  # not run


def test_history_names_a_notebooks_runs_by_cell_and_line(folder: Path) -> None:
    """Issue 61, 4: a notebook has cells and lines within them (`sales.ipynb:22-25` named
    lines of runfix's own document)."""
    path = notebook(folder / "sales.ipynb", md("# Sales"), cell("a = 1"), cell("b = 2\nc = 3"))
    assert runfix("run", path, cwd=folder).returncode == 0
    done = runfix("history", path, cwd=folder)
    said = [" ".join(line.split()[3:5]) for line in done.stdout.splitlines()]
    assert said == ["sales.ipynb:cell 3:1-2", "sales.ipynb:cell 2:1"], done.stdout


def test_a_plain_run_says_a_prompt_cell_has_no_code_yet(folder: Path) -> None:
    """Issue 61, 8: a plain run skipped an empty prompt cell silently."""
    path = notebook(folder / "ask.ipynb", cell("x = 1"), cell("# ai: a bar chart of x"))
    done = runfix("run", path, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{path}:cell 2:1:1: note: a prompt with no code yet; --generate writes it"
    ]


def test_without_inplace_the_notebook_is_not_written(folder: Path) -> None:
    path = notebook(folder / "read.ipynb", cell("1 + 1"))
    raw = path.read_bytes()
    done = runfix("run", path, cwd=folder)
    assert done.returncode == 0 and f"{path}:cell 1:1:1: note: 2" in done.stdout
    assert path.read_bytes() == raw


def test_a_notebook_runfix_cannot_run_gets_a_clear_answer(folder: Path) -> None:
    (folder / "text.ipynb").write_text("this is not json")
    done = runfix("run", folder / "text.ipynb", "--inplace", cwd=folder)
    assert done.returncode == 2 and "cannot run" in done.stderr and "not JSON" in done.stderr
    (folder / "old.ipynb").write_text(json.dumps({"nbformat": 3, "worksheets": [], "cells": []}))
    done = runfix("run", folder / "old.ipynb", cwd=folder)
    assert done.returncode == 2 and "nbformat 3" in done.stderr
    (folder / "bad.ipynb").write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [{"x": 1}]})
    )
    done = runfix("run", folder / "bad.ipynb", cwd=folder)
    assert done.returncode == 2 and "not a valid notebook" in done.stderr
    assert (folder / "bad.ipynb").read_text().startswith('{"nbformat": 4')  # never written
    done = runfix("run", folder / "text.py", "--inplace", cwd=folder)
    assert done.returncode == 2 and "--inplace" in done.stderr

    # no kernelspec: its code is run as Python; another language's, in that kernel or a
    # message saying there is none
    plain = notebook(folder / "plain.ipynb", cell("print('ok')"), language_info={"name": "python"})
    assert "cell 1:1:1: note: ok" in runfix("run", plain, cwd=folder).stdout
    spec = {"name": "nope", "display_name": "Nope", "language": "cobol"}
    other = notebook(folder / "cobol.ipynb", cell("DISPLAY 'HI'."), kernelspec=spec)
    done = runfix("run", other, cwd=folder)
    assert done.returncode == 2 and "its kernel runs cobol; runfix runs Python" in done.stderr


@pytest.mark.model
def test_fix_writes_the_fixed_cell_into_the_notebook(folder: Path) -> None:
    path = notebook(
        folder / "fix.ipynb",
        md("A helper, then its use"),
        cell("def mean(xs):\n    return sum(xs) / count"),
        cell("print(mean([2, 4]))"),
    )
    (folder / "pyproject.toml").write_text(
        f'[tool.runfix]\npython = "{sys.executable}"\nmodel = {{ name = "test-model" }}\n'
    )
    with ModelServer() as model:
        model.script(code("def mean(xs):\n    return sum(xs) / len(xs)"))
        done = runfix(
            "run", path, "--fix", "--inplace", cwd=folder,
            OPENAI_API_KEY="test-key", OPENAI_BASE_URL=model.url,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)
    assert after.cells[1].source == "def mean(xs):\n    return sum(xs) / len(xs)"
    assert after.cells[2].source == "print(mean([2, 4]))"
    assert [o.text for o in after.cells[2].outputs] == ["3.0\n"]
    assert "wrote the fixes and the outputs of" in done.stdout


def _saved(path: Path) -> list[list[tuple[str, Any]]]:
    """Each code cell's saved outputs as (type, what it holds: stream text, or the sorted
    MIME types of a value or display)."""
    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)
    return [
        [
            (
                o.output_type,
                o.get("text") if o.output_type == "stream" else sorted(o.get("data", {})),
            )
            for o in c.outputs
        ]
        for c in after.cells
        if c.cell_type == "code"
    ]


def test_inplace_with_fix_saves_what_jupyter_saves_as_plain_inplace_does(folder: Path) -> None:
    """Issue 70, 1: `--inplace --fix` saved runfix's own summaries (`DataFrame 3×2`, a
    figure as `<figure 640×480>`, an execute_result for a plot cell whose last statement is
    `plt.show()`) where plain `--inplace` saves what Jupyter does. No cell fails here: no
    model is asked."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    cells = (
        cell("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})\ndf"),
        cell(
            "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
            "import matplotlib.pyplot as plt\nplt.bar([1, 2, 3], [3, 1, 2])\nplt.show()"
        ),
        cell("print('done')"),
    )
    plain = notebook(folder / "plain.ipynb", *cells)
    fixed = notebook(folder / "fixed.ipynb", *cells)
    assert runfix("run", plain, "--inplace", cwd=folder).returncode == 0
    done = runfix("run", fixed, "--inplace", "--fix", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    saved = _saved(fixed)
    assert saved == _saved(plain)
    frame, plot, printed = saved
    assert frame == [("execute_result", ["text/html", "text/plain"])]
    assert plot == [("display_data", ["image/png", "text/plain"])]  # no `<BarContainer …>`
    assert printed == [("stream", "done\n")]


def test_a_big_notebook_runs_and_is_written_whole(folder: Path) -> None:
    """A 50 MB output kept through an --inplace run; one cell of 10,000 run by number."""
    blob = {"output_type": "stream", "name": "stdout", "text": "x" * (50 * 1024 * 1024)}
    big = notebook(
        folder / "big.ipynb",
        cell("print('kept')", outputs=[nbformat.from_dict(blob)], execution_count=1),
        cell("1 + 1"),
    )
    done = runfix("run", big, "--cell", "2", "--inplace", cwd=folder)
    assert done.returncode == 0, done.stderr
    after = nbformat.read(big, as_version=4)
    assert len(after.cells[0].outputs[0].text) == 50 * 1024 * 1024  # not run: kept
    assert after.cells[1].outputs[0].data["text/plain"] == "2"

    many = notebook(folder / "many.ipynb", *(cell(f"x = {i}\nx") for i in range(10_000)))
    done = runfix("run", many, "--cell", "10000", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert f"{many}:cell 10000:2:1: note: 9999" in done.stdout
