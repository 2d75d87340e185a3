"""A notebook as one document (`lsp.notebooks`): where each code cell stands in it, and its
edits and diagnostics said on the cells (`lsp.notebook_wire`)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from lsprotocol import types as lsp
from nbformat import v4

from executor.events import Error, Frame
from executor.text import split_lines
from lsp_server.cli.history import _lines
from lsp_server.cli.notebook_file import NotebookFile
from lsp_server.lsp.notebook_wire import cell_diagnostics, cell_text_edit
from lsp_server.record.tracebacks import ipython_traceback
from lsp_server.text.notebooks import Notebook, Place
from tests.support.notebooks import notebook


def _notebook() -> Notebook:
    return Notebook(
        "file:///nb.ipynb",
        [("c0", True, "a = 1\na"), ("m", False, "# title"), ("c1", True, ""), ("c2", True, "b\n")],
    )


def test_the_document_is_the_code_cells_in_order_each_under_a_marker() -> None:
    nb = _notebook()
    text = Notebook.text_of(["a = 1\na", "", "b\n"])
    assert text == "# %%\na = 1\na\n# %%\n\n# %%\nb\n\n"
    assert [nb.start(c) for c in nb.cells] == [1, 4, 6]
    assert nb.end() == len(split_lines(text))
    assert nb.at(2) == Place("c0", 1) and nb.at(3) is None and nb.below(3) == Place("c1", 0)
    assert nb.at(7) == Place("c2", 1)  # the empty line after the cell's newline


def test_a_structural_change_says_which_lines_went_and_what_came() -> None:
    nb = _notebook()
    # the markdown cell and c1 replaced by a new code cell: c1's lines (its marker too) go
    span, text = nb.restructure(1, 2, [("n", True, "x = 0")])
    assert span == (3, 5) and text == "# %%\nx = 0\n"
    assert nb.cells == ["c0", "n", "c2"] and nb.start("c2") == 6
    # a markdown cell inserted: no code line moves
    span, text = nb.restructure(0, 0, [("m2", False, "# top")])
    assert span == (0, 0) and text == ""
    assert nb.cells == ["c0", "n", "c2"] and nb.start("c0") == 1


def test_an_edit_of_the_document_is_an_edit_of_the_cell_it_changes() -> None:
    nb = _notebook()
    lines = {"c0": split_lines("a = 1\na"), "c1": [], "c2": split_lines("b\n")}
    width = len
    whole = lsp.TextEdit(lsp.Range(lsp.Position(1, 0), lsp.Position(3, 0)), "a = 2\na\n")
    cell, edit = cell_text_edit(nb, lines.__getitem__, whole, width) or ("", whole)
    assert cell == "c0" and edit.new_text == "a = 2\na"  # the cell's last line keeps no newline
    assert (edit.range.end.line, edit.range.end.character) == (1, 1)
    across = lsp.TextEdit(lsp.Range(lsp.Position(2, 0), lsp.Position(5, 0)), "")
    assert cell_text_edit(nb, lines.__getitem__, across, width) is None  # never across cells
    # lines inserted at a marker are the cell above's last lines, as the document has them
    # (a one-line prompt cell's generated body)
    at_marker = lsp.TextEdit(lsp.Range(lsp.Position(3, 0), lsp.Position(3, 0)), "import os\n")
    assert cell_text_edit(nb, lines.__getitem__, at_marker, width) == (
        "c0",
        lsp.TextEdit(lsp.Range(lsp.Position(1, 1), lsp.Position(1, 1)), "\nimport os"),
    )
    at_end = lsp.TextEdit(lsp.Range(lsp.Position(8, 0), lsp.Position(8, 0)), "c = 2\n")
    assert cell_text_edit(nb, lines.__getitem__, at_end, width) == (
        "c2",
        lsp.TextEdit(lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)), "\nc = 2"),
    )
    # above the first cell's marker there is no cell: the top of the first one
    at_top = lsp.TextEdit(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), "import os\n")
    assert cell_text_edit(nb, lines.__getitem__, at_top, width) == (
        "c0",
        lsp.TextEdit(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), "import os\n"),
    )
    joined = lsp.TextEdit(lsp.Range(lsp.Position(3, 0), lsp.Position(3, 0)), "x")
    assert cell_text_edit(nb, lines.__getitem__, joined, width) is None  # onto the marker


def test_diagnostics_go_to_the_cells_that_hold_them_and_every_cell_gets_its_list() -> None:
    nb = _notebook()

    def item(line: int, end: int) -> dict[str, object]:
        return {
            "range": {
                "start": {"line": line, "character": 2},
                "end": {"line": end, "character": 3},
            },
            "message": str(line),
        }

    out = cell_diagnostics(nb, [item(2, 2), item(6, 7), item(0, 1)])
    assert [d["message"] for d in out["c0"]] == ["2", "0"] and out["c1"] == []
    assert out["c0"][1]["range"]["start"] == {"line": 0, "character": 0}  # from the marker
    assert out["c2"][0]["range"] == {
        "start": {"line": 0, "character": 2},
        "end": {"line": 1, "character": 3},
    }


def _error(*frames: Frame) -> Error:
    return Error("RecursionError", "too deep", frames, "")


def test_a_saved_traceback_names_frames_by_the_run_that_compiled_them_as_ipython_does() -> None:
    """Issue 70, 6: Jupyter shows `Cell In[2], line 1`; runfix saved `File "nb.ipynb", line 7`
    (a line of its own document)."""
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    cell = Frame("/p/nb.ipynb", 7, "<module>", 0, (2, 1), "", ("f(0)\n",))
    inner = Frame("/p/nb.ipynb", 4, "f", 2999, (1, 3), "f(x)", ("def f(x):\n", "    f(x)\n"))
    lib = Frame("/usr/lib/x.py", 12, "g", 0, None, "g(a, *b)", ("    return a\n",))
    said = [ansi.sub("", e) for e in ipython_traceback(_error(cell, inner, lib)) or []]
    assert said == [
        "-" * 75,
        "RecursionError                            Traceback (most recent call last)",
        "Cell In[2], line 1\n----> 1 f(0)\n",
        "Cell In[1], line 3, in f(x)\n      2 def f(x):\n----> 3     f(x)\n",
        "Cell In[1], line 3, in f(x)\n      2 def f(x):\n----> 3     f(x)\n",
        "    [... skipping similar frames: f at line 3 (2997 times)]\n",
        "Cell In[1], line 3, in f(x)\n      2 def f(x):\n----> 3     f(x)\n",
        "File /usr/lib/x.py:12, in g(a, *b)\n---> 12     return a\n",
        "RecursionError: too deep",
    ]
    # no frame a run sent (a syntax error, an older kernel side): Python's own text stays
    assert ipython_traceback(_error(lib)) is None


def test_history_names_a_run_by_the_cell_holding_its_code_whatever_the_editor_numbered(
    tmp_path: Path,
) -> None:
    """Issue 70, 5: Neovim's buffer of a notebook holds its markdown cells, VS Code's and the
    terminal's document does not: a run's lines alone named the wrong cell."""
    book = notebook(
        v4.new_markdown_cell("# t"), v4.new_code_cell("a = 1"), v4.new_code_cell("b = 2\nc = 3")
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(book, path)
    assert _lines(path, 5, 6, "b = 2\nc = 3") == "cell 3:1-2"  # Neovim's lines 6-7
    assert _lines(path, 3, 4, "b = 2\nc = 3") == "cell 3:1-2"  # the terminal's 4-5
    assert _lines(path, 4, 4, "c = 3") == "cell 3:2"
    assert _lines(path, 1, 1, "gone = 1") == "cell 2:1"  # edited since: by the lines


def test_a_notebooks_cell_number_counts_every_cell_it_shows(tmp_path: Path) -> None:
    """`runfix run NB.ipynb --cell 3` ran the third code cell, which it names `cell 4`."""
    book = notebook(v4.new_markdown_cell("# t"), v4.new_code_cell("a = 1"), v4.new_code_cell("b"))
    path = tmp_path / "nb.ipynb"
    nbformat.write(book, path)
    read = NotebookFile.read(path)
    assert read.code_cell(3) == 2 and read.code_cell(2) == 1
    assert read.code_cell(1) == "its cell 1 is a markdown cell that does not run"
    assert read.code_cell(4) == "the notebook has 3 cells"
