"""Cells in the percent format (Jupytext, VS Code, Spyder): `# %%` starts a cell (`// %%`
and `-- %%` in languages whose comments are so written, as jupytext writes them).

A prompt (`# ai: ...`, see `prompts`) starts a cell too. Lines are 0-based
here, as in LSP. A file without markers is one cell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_MARKER = re.compile(r"^\s*(#|//|--)\s?%%")
_COMMENT = re.compile(r"^\s*(?:#|//|--)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Cell:
    first: int
    """The first line of the cell: its marker line, or 0 for the first cell."""
    last: int
    has_marker: bool

    @property
    def code_first(self) -> int:
        """The first line of code (the line after the marker)."""
        return self.first + 1 if self.has_marker else self.first


def is_marker(line: str) -> bool:
    return _MARKER.match(line) is not None


def is_text_marker(line: str) -> bool:
    """The marker of a markdown or raw cell (`# %% [markdown]`): its lines are not code."""
    return is_marker(line) and line.rstrip().endswith(("[markdown]", "[md]", "[raw]"))


def prompt_text(line: str, markers: Sequence[str]) -> str | None:
    """The instruction if the line is a prompt (a comment starting with a marker, on a line
    of its own or after a cell marker: `# %% ai: …`), else None."""
    match = _COMMENT.match(line)
    if match is None:
        return None
    comment = match.group(1)
    if is_marker(line):
        comment = comment.removeprefix("%%").strip()
    for marker in markers:
        if comment.lower().startswith(marker.lower()):
            return comment[len(marker) :].strip()
    return None


def starts_cell(line: str, prompt_markers: Sequence[str] = ()) -> bool:
    return is_marker(line) or (
        bool(prompt_markers) and prompt_text(line, prompt_markers) is not None
    )


def split_cells(lines: Sequence[str], prompt_markers: Sequence[str] = ()) -> list[Cell]:
    markers = [i for i, line in enumerate(lines) if starts_cell(line, prompt_markers)]
    last = max(len(lines) - 1, 0)
    if not markers:
        return [Cell(0, last, False)]
    cells: list[Cell] = []
    if markers[0] > 0 and any(line.strip() for line in lines[: markers[0]]):
        cells.append(Cell(0, markers[0] - 1, False))
    for i, start in enumerate(markers):
        end = markers[i + 1] - 1 if i + 1 < len(markers) else last
        cells.append(Cell(start, end, True))
    return cells


def cell_at(cells: Sequence[Cell], line: int) -> Cell | None:
    for cell in cells:
        if cell.first <= line <= cell.last:
            return cell
    return None


def code_of(lines: Sequence[str], first: int, last: int) -> str:
    """The text of lines first..last (inclusive), newline-terminated."""
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines[first : last + 1])
