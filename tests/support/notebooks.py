"""Notebooks as the parity tests compare them (issues 61, 70): what a reader sees of each
cell (its id, type, count and outputs' types and texts), and what nbclient — the engine
of `jupyter nbconvert --execute` — saves for the same cells."""

from __future__ import annotations

import copy
import re
from typing import Any

from nbformat import v4

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PYTHON3 = {"name": "python3", "display_name": "Python 3", "language": "python"}


def notebook(*cells: Any, kernelspec: dict[str, str] | None = None) -> Any:
    """A Python notebook of `cells`."""
    book = v4.new_notebook()
    book.cells = list(cells)
    book.metadata["kernelspec"] = kernelspec or PYTHON3
    book.metadata["language_info"] = {"name": "python"}
    return book


def said(output: Any) -> dict[str, Any]:
    """What of an output a reader of the notebook sees (an image's bytes and a table's HTML
    vary with the run: their mime types are compared, and the texts)."""
    seen: dict[str, Any] = {"output_type": output.output_type}
    for key in ("name", "text", "ename", "evalue", "execution_count"):
        if key in output:
            seen[key] = output[key]
    if "traceback" in output:  # each entry's first line, uncoloured: `Cell In[2], line 4`
        seen["traceback"] = [ANSI.sub("", e).split("\n")[0] for e in output.traceback]
    if "data" in output:
        seen["data"] = {
            mime: value if mime == "text/plain" else "…" for mime, value in output.data.items()
        }
    return seen


def cells(book: Any) -> list[tuple[str, str, int | None, list[dict[str, Any]]]]:
    """Each cell as a reader sees it: id, type, execution count, outputs (`said`)."""
    return [
        (
            cell.id,
            cell.cell_type,
            cell.get("execution_count"),
            [said(o) for o in cell.get("outputs", [])],
        )
        for cell in book.cells
    ]


def as_jupyter_saves(book: Any, allow_errors: bool = False) -> Any:
    """`book`'s cells run by nbclient from a fresh kernel, each code cell's outputs and count
    cleared first: what Jupyter saves for them."""
    from nbclient import NotebookClient

    jupyter = copy.deepcopy(book)
    for cell in jupyter.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    NotebookClient(jupyter, kernel_name="python3", timeout=60, allow_errors=allow_errors).execute()
    return jupyter
