"""The open notebooks of an LSP client (`notebookDocument/*`), each one runfix document of its
code cells (`text.notebooks.Notebook`); which notebook a cell's URI is in.

LSP's notebook sync gives the server the cells, each a text document with a URI of its
own. The notebook's document (under the notebook's URI) is made of them and kept in step
with their edits (`features.notebooks`); what goes to the client is said on the cells
(`notebook_wire`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lsp_server.outputs.results import DocumentResults
from lsp_server.text.notebooks import Notebook


@dataclass
class Carry:
    """One change of a notebook, for the next to complete: VS Code sends a split as a cut of
    a cell's lines, then a new cell of them; a join as the lines added to a cell, then the
    cell they came from deleted. What the lines one took away showed is shown where the
    other put the same text."""

    taken: list[DocumentResults] = field(default_factory=list)
    """What the lines it took away showed, as if they stood from line 0."""
    put: list[tuple[int, int]] = field(default_factory=list)
    """The lines it put text on (first, last), after it."""


class Notebooks:
    """The open notebooks, and the notebook each code cell belongs to."""

    def __init__(self) -> None:
        self.open: dict[str, Notebook] = {}
        self._of: dict[str, str] = {}
        self.last: dict[str, Carry] = {}
        """Each notebook's last change (`Carry`)."""

    def add(self, notebook: Notebook) -> None:
        self.open[notebook.uri] = notebook
        self.reindex(notebook)

    def reindex(self, notebook: Notebook) -> None:
        """The notebook's cells changed: which cell is whose, again."""
        for cell in [c for c, nb in self._of.items() if nb == notebook.uri]:
            del self._of[cell]
        for cell, _ in notebook.all:
            self._of[cell] = notebook.uri

    def remove(self, uri: str) -> Notebook | None:
        notebook = self.open.pop(uri, None)
        self.last.pop(uri, None)
        if notebook is not None:
            for cell, _ in notebook.all:
                self._of.pop(cell, None)
        return notebook

    def of_cell(self, cell: str) -> Notebook | None:
        """The notebook a cell (of any kind) is in."""
        uri = self._of.get(cell)
        return self.open.get(uri) if uri is not None else None

    def is_cell(self, uri: str) -> bool:
        return uri in self._of
