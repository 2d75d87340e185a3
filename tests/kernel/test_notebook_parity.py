"""A notebook `runfix run --inplace` saves holds what Jupyter saves for the same run
(issue 61, 3 and 9): nbclient — what `jupyter nbconvert --execute` runs — runs each
notebook too, and the two files are compared cell by cell: the same outputs (types, mime
types, texts), execution counts and cell ids. The notebooks cover what runfix did not do
as Jupyter does: `clear_output` in a loop, display updates, a kernelspec without a name, a
`skip-execution` tag, IPython's history (`In`, `Out`, `_i`), only the last expression's
value kept, a `;` that hides it, and pandas' own HTML for a table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from tests.support.notebooks import as_jupyter_saves, cells, notebook

RUNFIX = [sys.executable, "-m", "lsp_server"]


c = v4.new_code_cell

NOTEBOOKS = {
    "clearing": notebook(
        c(
            "from IPython.display import clear_output\n"
            "for i in range(3):\n    clear_output(wait=True)\n    print('step', i)"
        ),
        c("print('gone')\nclear_output()\nprint('kept')"),
    ),
    "updates": notebook(
        c("from IPython.display import display\nh = display('first', display_id=True)"),
        c("h2 = display({'a': 1}, display_id=True)\nprint('between')\nh2.update({'a': 2})"),
    ),
    "no-name": notebook(c("x = 40\nx + 2"), kernelspec={"display_name": "Python 3"}),
    "tags": notebook(
        c("ran = 1"),
        c("ran = 2\nprint('skipped')", metadata={"tags": ["skip-execution"]}),
        c("ran"),
    ),
    "history": notebook(c("1 + 1"), c("len(In), In[1], Out[1]"), c("_i")),
    "last-value": notebook(
        c("x = 1\nx\nx + 1"),
        c("y = 3\ny;"),
        c(
            "import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots()\nax.set_ylabel('revenue')\nplt.close(fig)\n'done'"
        ),
    ),
    "error": notebook(
        c("import os\ndef f(x):\n    return 1 / x"),
        c("def g(n):\n    return f(n) if n < 1 else g(n - 1)\ny = 2\ng(3)"),
    ),
    "table": notebook(
        c("import pandas as pd\ndf = pd.DataFrame({'month': range(6), 'units': range(6)})\ndf")
    ),
}


def _runfix(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUNFIX, *args], capture_output=True, text=True, cwd=cwd, timeout=120, input=stdin
    )


@pytest.mark.parametrize("way", ["inplace", "neovim"])
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_runfix_saves_what_jupyter_saves(name: str, way: str, tmp_path: Path) -> None:
    """`way`: `runfix run --inplace`, or a run and then Neovim's `:w` (the plugin's
    `runfix notebook read`, then `runfix notebook write` of the buffer's text)."""
    book = NOTEBOOKS[name]
    raises = name == "error"
    jupyter = as_jupyter_saves(book, allow_errors=raises)
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(book, path)
    if way == "inplace":
        done = _runfix("run", str(path), "--inplace", cwd=tmp_path)
    else:
        done = _runfix("run", str(path), cwd=tmp_path)
        buffer = _runfix("notebook", "read", str(path), cwd=tmp_path).stdout
        wrote = _runfix("notebook", "write", str(path), cwd=tmp_path, stdin=buffer)
        assert wrote.returncode == 0, wrote.stderr
    assert done.returncode == int(raises), done.stdout + done.stderr
    saved = nbformat.read(path, as_version=4)
    assert cells(saved) == cells(jupyter)
    assert saved.metadata == book.metadata  # (a kernelspec without a name kept as it was)
    if name == "table":
        [value] = saved.cells[0].outputs
        assert "<table" in value.data["text/html"] and "5" in value.data["text/plain"]


@pytest.mark.parametrize("way", ["fix", "generate"])
def test_a_fixed_or_generated_notebook_is_saved_as_jupyter_saves_it(
    way: str, tmp_path: Path
) -> None:
    """Issue 70, done when: a notebook with a DataFrame, a plot, a print and a prompt cell,
    saved by `run --inplace --fix` (a cell fixed by the model) or `--inplace --generate`
    (the prompt's body written and run), holds what nbclient saves for the notebook as it
    ends up: outputs, their texts, the counts."""
    from tests.support.model_server import ModelServer, code

    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    book = notebook(
        c("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf"),
        c("import matplotlib.pyplot as plt\nplt.plot(df['a'])\nplt.show()"),
        c("print('rows', len(df))" if way == "generate" else "print('rows', len(dff))"),
        c("# ai: print the sum of a" if way == "generate" else "print(df['a'].sum())"),
    )
    path = tmp_path / "book.ipynb"
    nbformat.write(book, path)
    (tmp_path / "pyproject.toml").write_text('[tool.runfix]\nmodel = { name = "test-model" }\n')
    with ModelServer() as model:
        model.script(
            code("print(df['a'].sum())") if way == "generate" else code("print('rows', len(df))")
        )
        done = subprocess.run(
            [*RUNFIX, "run", str(path), "--inplace", f"--{way}"], capture_output=True,
            text=True, cwd=tmp_path, timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": model.url},
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    saved = nbformat.read(path, as_version=4)
    assert cells(saved) == cells(as_jupyter_saves(saved))
