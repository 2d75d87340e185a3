"""What a run is made of: where the document stands (`Where`, resolved once per request)
and the pieces of it a run takes (`RunMode`); what running them came to is `runner`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from executor.jupyter import Kernel
from executor.trust import Choice
from lsp_server.contract import Range
from lsp_server.editor import Snapshot
from lsp_server.record.store import Asked
from lsp_server.settings import Settings
from lsp_server.text.cells import split_cells
from lsp_server.text.languages import PYTHON, Language


class Admission:
    """What admitting one request's document to its kernel came to, kept for the rest of
    the request (`Gate.admit`): a fix's candidates run where its run was admitted, and no
    fact of it is derived again."""

    __slots__ = ("allowed", "choice", "kernel", "settings")

    def __init__(self) -> None:
        self.kernel: Kernel | None = None
        self.settings: Settings | None = None
        self.choice: Choice | None = None
        self.allowed: tuple[str, ...] = ()
        """What the user let the model's code do for this request ("Allow once" when the
        runtime guard stopped it): its later attempts and the fix's check may too."""


@dataclass(frozen=True)
class Where:
    """A document's context for one request, resolved once at the front end's door
    (`Flow.where`): the core takes it and never looks a document's folder or settings up.

    For a request that waits on the user's edit (a fix applied, a body generated), `now`
    gives the same context over the text as it is then."""

    uri: str
    path: str
    """What tracebacks call the document: its path, or its URI when it has no file."""
    folder: Path
    """The workspace folder its code runs in."""
    settings: Settings
    """The folder's settings, the user's trust decision applied."""
    text: Snapshot
    """The text (and its version) when the request came."""
    language: Language | None = PYTHON
    """The document's language (None: one runfix does not know, and does not run)."""
    choice: Choice | None = None
    """The user's trust decision for the folder, as read when the request came."""
    admission: Admission = field(default_factory=Admission, compare=False)
    """This request's admission to the kernel, once made (shared by its `now`s)."""

    def now(self, text: Snapshot) -> Where:
        return replace(self, text=text)


@dataclass(frozen=True)
class Piece:
    """Lines first..last (0-based, inclusive) to run as one execute request."""

    first: int
    last: int


def pieces_for(
    lines: Sequence[str], line_range: Range | None, prompt_markers: Sequence[str] = ()
) -> list[Piece]:
    """The lines a range covers (one piece), or every cell that has code."""
    if not lines:
        return []
    if line_range is not None:
        if line_range.start.line >= len(lines):
            return []  # the empty last line, or past the end: nothing to run
        first = max(0, line_range.start.line)
        last = line_range.end.line
        if line_range.end.character == 0 and last > first:
            last -= 1  # a selection of whole lines ends at column 0 of the next line
        last = max(first, min(last, len(lines) - 1))
        return [Piece(first, last)]
    return [
        Piece(cell.code_first, cell.last)
        for cell in split_cells(lines, prompt_markers)
        if any(_is_code(line) for line in lines[cell.code_first : cell.last + 1])
    ]


def _is_code(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith(("#", "//", "--"))


@dataclass(frozen=True)
class RunMode:
    """Which of a document's pieces a run (`Flow.run`) takes, and how it is told."""

    after: int = -1
    """Only pieces that start below this line."""
    before: int | None = None
    """Only pieces that start above this line."""
    within: tuple[tuple[int, int], ...] | None = None
    """Only pieces that start within one of these line spans."""
    origin: str = "user"
    """Who ran it, as the record says (`user`, `model`, `agent: <name>`)."""
    say_stop: bool = True
    """Say in the document that later cells did not run after one failed."""
    asked: Asked | None = None
    """For code the model just wrote: that exchange (the run's record keeps it)."""

    def pieces(self, where: Where, line_range: Range | None) -> list[Piece]:
        """The pieces of `where.text` this mode takes: the range's lines, or its cells."""
        found = pieces_for(where.text.lines, line_range, where.settings.prompt_markers)
        return [p for p in found if self.takes(p)]

    def takes(self, piece: Piece) -> bool:
        return (
            piece.first > self.after
            and (self.before is None or piece.first < self.before)
            and (self.within is None or any(a <= piece.first <= b for a, b in self.within))
        )


EVERY_PIECE = RunMode()
"""Every piece, run by the user: `Flow.run`'s default mode."""
