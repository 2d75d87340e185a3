"""A notebook as the percent text an editor edits, and back (`record.notebooks`): the text
reads back to the same cells; what did not change keeps its id and outputs; a cell that ran
gets its run's outputs, wherever its lines moved."""

from __future__ import annotations

from typing import Any

from nbformat import v4

from lsp_server.record.notebooks import buffer_text, cells_of, merged
from lsp_server.record.store import RecordedOutput, RecordedRun


def _notebook() -> Any:
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Py"}
    stream = v4.new_output("stream", name="stdout", text="old\n")
    nb.cells = [
        v4.new_markdown_cell("# Title\n\nSome *text*."),
        v4.new_code_cell("a = 1\n", outputs=[stream]),
        v4.new_code_cell(""),
        v4.new_raw_cell("raw text"),
        v4.new_code_cell("print(a)"),
    ]
    return nb


def test_the_text_reads_back_to_the_same_cells_and_an_untouched_notebook_is_the_same() -> None:
    nb = _notebook()
    text = buffer_text(nb)
    assert text.startswith("# %% [markdown]\n# # Title\n#\n# Some *text*.\n# %%\na = 1\n\n")
    assert cells_of(text) == [(c.cell_type, c.source) for c in nb.cells]
    assert merged(nb, text, [], None) == nb


def test_an_edit_keeps_the_cell_and_a_run_gives_a_cell_its_outputs() -> None:
    nb = _notebook()
    text = buffer_text(nb).replace("print(a)", "print(a + 1)")
    text = text.replace("# %%\na = 1", "# %%\nz = 0\n# %%\na = 1")  # a cell inserted above
    run = RecordedRun(
        path="nb.ipynb", first=99, last=99, code="print(a + 1)\n", origin="user",
        status="ok", started=0.0, duration=0.1, outputs=(RecordedOutput(99, "2\n"),),
    )  # fmt: skip
    made = merged(nb, text, [run], None)
    kinds = [c.cell_type for c in made.cells]
    assert kinds == ["markdown", "code", "code", "code", "raw", "code"]
    assert made.cells[0].id == nb.cells[0].id  # unchanged: the same cell
    assert made.cells[2].id == nb.cells[1].id and made.cells[2].outputs == nb.cells[1].outputs
    assert made.cells[1].source == "z = 0" and made.cells[1].outputs == []  # new
    # edited: the same cell (its id kept, as Jupyter and VS Code keep it), with its run's
    # output (issue 61, 3: Neovim's :w gave it a new id)
    assert made.cells[5].id == nb.cells[4].id
    assert [o.text for o in made.cells[5].outputs] == ["2\n"]
    assert made.metadata == nb.metadata


def test_a_markdown_line_that_looks_like_a_cell_marker_stays_in_its_cell() -> None:
    """Issue 58, S3: `%%` at the start of a markdown line, commented in the buffer, read as
    a cell marker, and `notebook read` → `write` (Neovim's `:e`, `:w`) made it a code cell."""
    nb = _notebook()
    nb.cells[0] = v4.new_markdown_cell("Cell magics:\n%%timeit\n\\%% (escaped)\n\\begin{x}")
    text = buffer_text(nb)
    assert "# %%timeit" not in text
    assert cells_of(text) == [(c.cell_type, c.source) for c in nb.cells]
    assert merged(nb, text, [], None) == nb


def test_a_prompt_cells_generated_body_that_ran_gives_the_cell_its_outputs() -> None:
    """Issue 70, 5: Generate runs the body under the prompt line; Neovim's `:w` matched runs
    to cells by their whole text, so the generated cell was saved with no outputs."""
    nb = _notebook()
    text = buffer_text(nb) + "# %%\n# ai: print a twice\nprint(a)\nprint(a)\n"
    run = RecordedRun(
        path="nb.ipynb", first=12, last=13, code="print(a)\nprint(a)\n", origin="model",
        status="ok", started=0.0, duration=0.1, outputs=(RecordedOutput(12, "1\n"),),
    )  # fmt: skip
    made = merged(nb, text, [run], None)
    assert made.cells[-1].source == "# ai: print a twice\nprint(a)\nprint(a)"
    assert [o.text for o in made.cells[-1].outputs] == ["1\n"]
    # a run of the body's last line alone is not the cell's
    part = RecordedRun(
        path="nb.ipynb", first=13, last=13, code="print(a)\n", origin="user",
        status="ok", started=0.0, duration=0.1, outputs=(RecordedOutput(13, "1\n"),),
    )  # fmt: skip
    assert merged(nb, text, [part], None).cells[-1].outputs == []
