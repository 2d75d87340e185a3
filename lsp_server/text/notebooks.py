"""A notebook as one runfix document: its code cells in notebook order, each under a `# %%`
line, so every part of runfix (runs, results, dataflow, staleness, fixes, the record)
works on it as on a percent-format file; and where each cell stands in that document.

The LSP front end keeps an open notebook's document in step with its cells' edits
(`lsp.notebooks`); `runfix run NB.ipynb` runs one read from disk (`cli.run`). A cell is
named by an editor's URI or by its number in the notebook.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MARKER = "# %%\n"
"""The line each code cell stands under in the notebook's document."""


@dataclass(frozen=True)
class Place:
    """A line of the notebook's document, on its cell: the cell's URI and its own line."""

    cell: str
    line: int


def cell_lines(text: str) -> int:
    """How many lines a cell's text has in an editor (an empty text has one)."""
    return text.count("\n") + 1


class Notebook:
    """One open notebook: its code cells in order, and where each stands in its document."""

    def __init__(self, uri: str, cells: Iterable[tuple[str, bool, str]]) -> None:
        self.uri = uri
        self.all: list[tuple[str, bool]] = []
        """Every cell in notebook order, and whether it is code (markdown is not)."""
        self.cells: list[str] = []
        """The code cells, in order: the document's."""
        self._sizes: dict[str, int] = {}
        self._starts: list[int] = []
        for cell, code, text in cells:
            self.all.append((cell, code))
            if code:
                self.cells.append(cell)
                self._sizes[cell] = cell_lines(text)
        self._index()

    def _index(self) -> None:
        """Each code cell's first line of code in the document (its marker is the line above)."""
        self._starts, at = [], 0
        for cell in self.cells:
            self._starts.append(at + 1)
            at += 1 + self._sizes[cell]

    @staticmethod
    def text_of(texts: Sequence[str]) -> str:
        """The document of cells whose texts are `texts`, in order."""
        return "".join(MARKER + text + "\n" for text in texts)

    def __contains__(self, cell: str) -> bool:
        return cell in self._sizes

    def start(self, cell: str) -> int:
        """The document's line of the cell's first line."""
        return self._starts[self.cells.index(cell)]

    def size(self, cell: str) -> int:
        return self._sizes[cell]

    def end(self) -> int:
        """The number of lines of the document."""
        return self._starts[-1] + self._sizes[self.cells[-1]] if self.cells else 0

    def at(self, line: int) -> Place | None:
        """The cell holding the document's `line`, and its line there (None: a marker line,
        or past the end)."""
        index = bisect.bisect_right(self._starts, line) - 1
        if index < 0:
            return None
        cell = self.cells[index]
        inner = line - self._starts[index]
        return Place(cell, inner) if inner < self._sizes[cell] else None

    def below(self, line: int) -> Place | None:
        """`at`, where a marker line counts as the first line of the cell under it."""
        found = self.at(line)
        if found is None:
            found = self.at(line + 1)
        return found

    def name(self, line: int) -> str:
        """The document's `line` as a notebook's reader names it: "cell 4, line 2" (the
        cell counted among all the notebook's cells, as it shows them; a marker line is
        its cell's first line)."""
        place = self.below(line)
        if place is None:
            return f"line {line + 1}"
        number = next(i for i, (cell, _) in enumerate(self.all) if cell == place.cell) + 1
        return f"cell {number}, line {place.line + 1}"

    # -- changes ---------------------------------------------------------------------------

    def resized(self, cell: str, lines: int) -> None:
        """The cell's text now has `lines` lines."""
        self._sizes[cell] = lines
        self._index()

    def span(self, first: int, count: int) -> tuple[int, int]:
        """The document's lines (first, end exclusive) that cells first..first+count-1 take,
        markers included; (where they would go, the same) when `count` is 0."""
        if first >= len(self.cells):
            return self.end(), self.end()
        begin = self._starts[first] - 1
        if count == 0:
            return begin, begin
        last = self.cells[first + count - 1]
        return begin, self._starts[first + count - 1] + self._sizes[last]

    def restructure(
        self, start: int, deleted: int, cells: Sequence[tuple[str, bool, str]]
    ) -> tuple[tuple[int, int], str]:
        """The notebook's cells start..start+deleted-1 (all kinds) are replaced by `cells`
        (URI, whether code, text): the document's lines the code cells that went took
        (first, end exclusive; where the new ones go when none went), and the document's
        text of those that came."""
        first = sum(1 for _, code in self.all[:start] if code)
        gone = sum(1 for _, code in self.all[start : start + deleted] if code)
        span = self.span(first, gone)
        self.all[start : start + deleted] = [(cell, code) for cell, code, _ in cells]
        came = [(cell, text) for cell, code, text in cells if code]
        for cell in self.cells[first : first + gone]:
            self._sizes.pop(cell, None)
        self.cells[first : first + gone] = [cell for cell, _ in came]
        for cell, text in came:
            self._sizes[cell] = cell_lines(text)
        self._index()
        return span, self.text_of([text for _, text in came])
