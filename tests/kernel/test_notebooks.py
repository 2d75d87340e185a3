"""Notebooks in and out: `runfix export` writes each cell's last recorded outputs into a
valid `.ipynb`; `runfix import` writes the percent script; a round trip keeps the cells."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import nbformat

RUNFIX = [sys.executable, "-m", "lsp_server"]
SCRIPT = """\
# %% [markdown]
# # Sales
# A short look, with *markdown*.

# %%
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"city": ["Lima", "Oslo"], "temp": [19.5, 4.25]})
df

# %%
print("mean", df.temp.mean())
plt.plot(df.temp)

# %%
1 / 0
"""


def runfix(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUNFIX, *map(str, args)], cwd=cwd, capture_output=True, text=True)


def test_export_writes_the_last_outputs_into_a_valid_notebook(folder: Path) -> None:
    script = folder / "analysis.py"
    script.write_text(SCRIPT)
    assert runfix("run", script, cwd=folder).returncode == 1  # the last cell raises
    done = runfix("export", script, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert "4 cells, 3 with outputs" in done.stdout
    notebook = nbformat.read(folder / "analysis.ipynb", as_version=4)
    nbformat.validate(notebook)
    markdown, table, plot, error = notebook.cells
    assert markdown.cell_type == "markdown" and "*markdown*" in markdown.source
    [frame] = table.outputs
    assert "Oslo" in frame.data["text/html"] and frame.data["text/plain"] == "DataFrame 2×2\n"
    printed, figure = plot.outputs
    assert printed.output_type == "stream" and printed.text == "mean 11.875\n"
    assert base64.b64decode(figure.data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    [raised] = error.outputs
    assert (raised.output_type, raised.ename) == ("error", "ZeroDivisionError")

    # An edited cell's outputs are not exported: they were not made by its code.
    script.write_text(SCRIPT.replace('print("mean"', 'print("average"'))
    assert runfix("export", script, "-o", folder / "edited.ipynb", cwd=folder).returncode == 0
    edited = nbformat.read(folder / "edited.ipynb", as_version=4)
    assert edited.cells[2].outputs == [] and edited.cells[1].outputs


def test_import_then_export_keeps_the_cells(folder: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Title\n\nSome **text**."),
        nbformat.v4.new_code_cell("x = 6 * 7\nx"),
        nbformat.v4.new_code_cell("print(x)"),
    ]
    nbformat.write(notebook, folder / "given.ipynb")
    done = runfix("import", folder / "given.ipynb", cwd=folder)
    assert done.returncode == 0, done.stderr
    script = (folder / "given.py").read_text()
    assert "# %% [markdown]\n# # Title" in script and "# %%\nx = 6 * 7\nx\n" in script
    # Never over an existing file without --force.
    again = runfix("import", folder / "given.ipynb", cwd=folder)
    assert again.returncode == 2 and "exists" in again.stderr  # a mistake in what was asked
    exported = runfix("export", folder / "given.py", "-o", folder / "back.ipynb", cwd=folder)
    assert exported.returncode == 0, exported.stderr
    back = nbformat.read(folder / "back.ipynb", as_version=4)
    nbformat.validate(back)
    assert [(c.cell_type, c.source) for c in back.cells] == [
        (c.cell_type, c.source) for c in notebook.cells
    ]
