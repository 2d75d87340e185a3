"""`runfix run NB.ipynb`: a notebook on disk run as one runfix document (its code cells in
order, each under a `# %%` line: `text.notebooks`), its results named by cell
(`NB.ipynb:cell 3:2:1`), and the notebook written back with `--inplace` (each code cell
that ran with its outputs, as `jupyter nbconvert --execute --inplace` writes them) or
`--fix` (the fixed cells' code). Everything else of the notebook — markdown cells, cell
ids, metadata, attachments, the outputs of cells that did not run — is kept; what is
written is validated by nbformat first and renamed into place whole.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.files import replace_file
from executor.text import split_lines
from lsp_server.folder_files import read_regular
from lsp_server.record.notebooks import (
    NOTEBOOK_LIMIT,
    cell_outputs,
    kernel_language,
    last_statement,
    load,
    notebook_language,
    saved_cell,
    written,
)
from lsp_server.record.store import RESTORE_RUNS, RunRecord, standing
from lsp_server.services.steps import PieceRun
from lsp_server.text.languages import LANGUAGES, Language
from lsp_server.text.notebooks import MARKER, Notebook


@dataclass
class NotebookFile:
    """A notebook read from disk, and its code cells as one document."""

    path: Path
    notebook: Any
    """As nbformat reads it (version 4)."""
    layout: Notebook
    language: Language
    raw: bytes
    """The file as it was read (written over only if it still says this)."""

    @property
    def code(self) -> list[Any]:
        """The code cells that run (the document's), in order."""
        return [cell for cell in self.notebook.cells if runs(cell)]

    @classmethod
    def read(cls, path: Path) -> NotebookFile:
        """The notebook at `path`; ValueError saying why it is not one runfix can run."""
        notebook, raw = load(path)
        said = kernel_language(notebook)
        if said and not any(said.lower() in lang.kernel_languages for lang in LANGUAGES):
            known = ", ".join(lang.name for lang in LANGUAGES)
            raise ValueError(f"its kernel runs {said}; runfix runs {known} notebooks")
        cells = [(str(i), runs(cell), cell.source) for i, cell in enumerate(notebook.cells)]
        layout = Notebook(path.as_uri(), cells)
        return cls(path, notebook, layout, notebook_language(notebook), raw)

    def lines(self) -> list[str]:
        """The document: the code cells in order, each under a `# %%` line."""
        return split_lines(Notebook.text_of([cell.source for cell in self.code]))

    def place(self, line: int, lines: Sequence[str] | None = None) -> str:
        """`cell N:L` of the document's 0-based `line` (N counts every cell, as the notebook
        shows them; L from 1); a marker line is its cell's first line. `lines`: the document
        as it is now (a generated body makes it longer than the notebook read): its markers
        say which code cell a line is in."""
        if lines is not None:
            markers = [i for i, text in enumerate(lines[: line + 1]) if text == MARKER]
            indices = [i for i, cell in enumerate(self.notebook.cells) if runs(cell)]
            if markers and len(markers) <= len(indices):
                return f"cell {indices[len(markers) - 1] + 1}:{max(line - markers[-1], 1)}"
        found = self.layout.below(line)
        if found is None:
            return f"line {line + 1}"
        return f"cell {int(found.cell) + 1}:{found.line + 1}"

    def code_cell(self, number: int) -> int | str:
        """Which code cell (from 1, among those that run) the notebook's cell `number` is:
        numbered from 1 as the notebook shows its cells, markdown counted, as `place` names
        them; else why none is."""
        cells = self.notebook.cells
        if not 1 <= number <= len(cells):
            return f"the notebook has {len(cells)} cells"
        if not runs(cells[number - 1]):
            kind = cells[number - 1].cell_type
            return f"its cell {number} is a {kind} cell that does not run"
        return sum(1 for cell in cells[:number] if runs(cell))

    def sources(self, lines: Sequence[str]) -> list[str] | None:
        """The code cells' sources in the document's `lines` (None: its cells no longer
        split as the notebook's do)."""
        parts: list[list[str]] = []
        for line in lines:
            if line == MARKER:
                parts.append([])
            elif parts:
                parts[-1].append(line)
            else:
                return None
        if len(parts) != len(self.code):
            return None
        out = []
        for part in parts:
            text = "".join(part)
            out.append(text[:-1] if text.endswith("\n") else text)
        return out

    def outputs(
        self, folder: Path, lines: Sequence[str], ran: Sequence[PieceRun] = ()
    ) -> dict[int, list[Any]]:
        """Each code cell's outputs (by its index among the code cells): what its run in
        `ran` produced (streams, values, displays, errors: as Jupyter keeps them), else
        the latest runs the folder's record has of its code as `lines` hold it; cells
        without either are left out."""
        record = RunRecord(folder)
        try:
            runs = record.recent(str(self.path), RESTORE_RUNS)
        finally:
            record.close()
        # The pieces that ran on these lines (the pieces of one run share their text: it is
        # compared once per run), by their first line.
        lines_now = tuple(lines)
        same: dict[int, bool] = {}
        for r in ran:
            if id(r.lines) not in same:
                same[id(r.lines)] = r.lines == lines_now
        ran_here = sorted((r for r in ran if same[id(r.lines)]), key=lambda r: r.piece.first)
        starts = [r.piece.first for r in ran_here]
        out: dict[int, list[Any]] = {}
        at = 0
        for index, text in enumerate(self.sources(lines) or []):
            first, last = at + 1, at + 1 + text.count("\n")  # under the cell's marker
            at = last + 1
            now = ran_here[bisect.bisect_left(starts, first) : bisect.bisect_right(starts, last)]
            if now:
                shown = last_statement(text) if self.language.python else None
                value_at = first + 1 + shown if shown is not None else None  # (spans from 1)
                out[index] = [o for r in now for o in cell_outputs(r.outcome, value_at)]
            elif recorded := standing(runs, lines, first, last):
                # as Jupyter saves the cell, where its run kept that: the runs before a fix
                # changed the document (runfix's own summaries otherwise)
                out[index] = [o for run in recorded for o in saved_cell(run, folder)[0]]
        return out

    def write(self, sources: Sequence[str] | None, outputs: dict[int, list[Any]] | None) -> bool:
        """Write the notebook with the code cells' `sources` and `outputs` (those given),
        each cell with new outputs numbered in order; False if the file changed since it
        was read (nothing is written then). nbformat's ValidationError if what would be
        written is not a valid notebook."""
        notebook = copy.deepcopy(self.notebook)
        count = 0
        for index, cell in enumerate(c for c in notebook.cells if runs(c)):
            if sources is not None:
                cell.source = sources[index]
            if outputs is not None and index in outputs:
                count += 1
                cell.outputs = outputs[index]
                cell.execution_count = count
                for output in cell.outputs:
                    if output.get("output_type") == "execute_result":
                        output["execution_count"] = count
        data = written(notebook)
        try:
            if read_regular(self.path, NOTEBOOK_LIMIT) != self.raw:
                return False
        except OSError:
            return False
        replace_file(self.path, data)
        return True


SKIP_TAG = "skip-execution"
"""A cell tagged so is not run (nbclient's `skip_cells_with_tag`, Jupyter Book's tag)."""


def runs(cell: Any) -> bool:
    """Whether a notebook's cell is code that runs: not markdown or raw, not tagged
    `skip-execution` (its code and outputs are left as they are)."""
    if cell.cell_type != "code":
        return False
    tags = cell.get("metadata", {}).get("tags")
    return not (isinstance(tags, list) and SKIP_TAG in tags)
