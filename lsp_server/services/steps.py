"""What happens around a piece's run, as an ordered list of steps (`Runner.steps`), as
nbclient's hooks around a cell: each step sees the run (`Running`) before the kernel has the
code and after it answered, in the list's order; a new step joins the list without editing
the others. The kernel's execute itself, and a guard's refusals asked again, are the
runner's (`Runner.run`).

- `Announced`: the lines a kept run covers are running again (their old results go stale),
  and the document's run count moves on;
- `Shaped`: the outcome made into results on the lines it ran on (rich outputs stored as
  files off the loop);
- `Kept`: a kept run's results handed to the desk (shown through the edits made meanwhile);
- `Recorded`: the run in the folder's run record (a notebook's cell with what Jupyter
  would save);
- `LateOutputs`: what another language's kernel publishes after the answer, shown and
  recorded once the run's own results are (`JupyterKernel.execute`'s `on_late`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from executor.events import Display, Event, RunOutcome, Value
from lsp_server.editor import Editor, Level
from lsp_server.outputs.bundles import OutputFiles
from lsp_server.outputs.results import DocumentResults, build
from lsp_server.record.notebooks import with_cell
from lsp_server.record.store import Asked, RecordedRun, entry, ran_text
from lsp_server.runs import Piece, Where
from lsp_server.services.desk import Desk
from lsp_server.session import Session
from lsp_server.text.languages import is_python

Shape = Callable[[RunOutcome], DocumentResults]
"""A run's results made of its outcome (`build`, with where it ran)."""


def _rich(outcome: RunOutcome) -> bool:
    """Whether a run showed more than text (images, HTML, …: files to store)."""
    return any(
        isinstance(e, (Display, Value)) and any(m != "text/plain" for m in e.data)
        for e in outcome.events
    )


async def shaped(shape: Shape, outcome: RunOutcome, *, in_thread: bool) -> DocumentResults:
    """A run's results; rich outputs are decoded and stored as files off the loop (`in_thread`),
    which keeps answering (a cell that shows 4,000 images); plain text is made at once."""
    if in_thread and _rich(outcome):
        return await asyncio.to_thread(shape, outcome)
    return shape(outcome)


@dataclass
class Running:
    """One piece's run as the steps see it: what runs, and what it came to so far."""

    where: Where
    piece: Piece
    code: str
    origin: str
    keep: bool
    """Its results are kept and shown (a document's run), else only answered."""
    files: OutputFiles | None
    fix_of: int | None = None
    model: Asked | None = None
    late: _Late | None = None
    """What the kernel publishes after the answer, kept for (`LateOutputs`)."""
    outcome: RunOutcome | None = None
    shape: Shape | None = None
    results: DocumentResults | None = None
    run_id: int | None = None
    """Its ticket in the folder's run record (None: not recorded)."""

    @property
    def on_late(self) -> Callable[[tuple[Event, ...]], None] | None:
        """What the kernel calls with what it publishes after the answer."""
        return self.late.took if self.late is not None else None

    @property
    def agent(self) -> bool:
        return self.origin.startswith("agent")

    @property
    def attempt(self) -> bool:
        """A fix's attempt: shown in the document only once applied, its files not stored."""
        return not self.keep and self.origin == "model"

    def entry(self, outcome: RunOutcome, results: DocumentResults) -> RecordedRun:
        """The run's entry in the record (a notebook's Python cell: with what Jupyter keeps)."""
        where, span = self.where, (self.piece.first, self.piece.last)
        run = entry(
            where.path, span, self.code, self.origin, outcome, results, self.fix_of, self.model
        )
        cell = self.keep and where.path.endswith(".ipynb") and is_python(where.language)
        return with_cell(run, outcome, self.files) if cell else run


@dataclass
class PieceRun:
    """One piece that ran: where, on which text, and what came back."""

    piece: Piece
    outcome: RunOutcome
    lines: tuple[str, ...]
    version: int
    record_id: int | None = None
    """Its ticket in the folder's run record (`RunRecord.id_for`; None: not recorded)."""
    results: DocumentResults | None = None
    """What the run showed, attributed to the lines it ran on."""


class Step(Protocol):
    """One step around a piece's run."""

    def before(self, run: Running) -> None:
        """Before the kernel has the code."""

    async def after(self, run: Running) -> None:
        """After the kernel answered (`run.outcome` is set)."""


class Announced:
    """A kept run's lines run again: what they showed goes stale; the run count moves on."""

    def __init__(self, desk: Desk, started: dict[str, int]) -> None:
        self.desk, self.started = desk, started

    def before(self, run: Running) -> None:
        if run.keep:
            where = run.where
            self.desk.ran_again(where.uri, where.text.version, run.piece.first, run.piece.last)
            self.started[where.uri] = self.started.get(where.uri, 0) + 1

    async def after(self, run: Running) -> None:
        pass


class Shaped:
    """The outcome made into results on the lines it ran on."""

    def before(self, run: Running) -> None:
        pass

    async def after(self, run: Running) -> None:
        assert run.outcome is not None
        where, piece, outcome = run.where, run.piece, run.outcome
        run.shape = functools.partial(
            build,
            path=where.path,
            lines=where.text.lines,
            fallback_line=piece.first,
            folder=None if run.attempt else where.folder,
            piece=(piece.first, piece.last),
            files=run.files,
            ran=ran_text(outcome) + (f" · by {run.origin}" if run.agent else ""),
        )
        run.results = await shaped(run.shape, outcome, in_thread=not run.attempt)


class Kept:
    """A kept run's results, to the desk."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def before(self, run: Running) -> None:
        pass

    async def after(self, run: Running) -> None:
        if run.keep and run.results is not None:
            self.desk.keep(run.where.uri, run.where.text.version, run.results)


class Recorded:
    """The run in the folder's run record; what the record has to say, said once."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session, self.editor = session, editor

    def before(self, run: Running) -> None:
        pass

    async def after(self, run: Running) -> None:
        assert run.outcome is not None and run.results is not None
        where = run.where
        entry = run.entry(run.outcome, run.results)
        run.run_id = self.session.recorded(where.folder, where.settings, entry)
        for message in self.session.record(where.folder, where.settings).told_once():
            self.editor.tell(f"runfix: {message}", Level.WARNING)


class LateOutputs:
    """What another language's kernel publishes for a kept run after its answer: shown on
    the run's lines, in place of what they showed, and put in its record — once the run's
    own results are kept and recorded (so it stands after `Kept` and `Recorded`)."""

    def __init__(
        self, editor: Editor, desk: Desk, session: Session, started: dict[str, int]
    ) -> None:
        self.editor, self.desk, self.session, self.started = editor, desk, session, started

    def before(self, run: Running) -> None:
        if run.keep:
            run.late = _Late(self, run, self.started.get(run.where.uri, 0))

    async def after(self, run: Running) -> None:
        if run.late is not None:
            run.late.kept()


class _Late:
    """One run's late outputs (`LateOutputs`)."""

    def __init__(self, step: LateOutputs, run: Running, number: int) -> None:
        self.step, self.run, self.number = step, run, number
        self.events: tuple[Event, ...] | None = None
        self._kept = False
        self._lock = asyncio.Lock()  # one at a time, the newest events each time

    def took(self, events: tuple[Event, ...]) -> None:
        """The run's events, with what came late."""
        self.events = events
        if self._kept:
            self.step.editor.spawn(self._show(), "a run's late outputs")

    def kept(self) -> None:
        """The run's own results are kept and recorded."""
        self._kept = True
        if self.events is not None:
            self.step.editor.spawn(self._show(), "a run's late outputs")

    async def _show(self) -> None:
        async with self._lock:
            run, desk = self.run, self.step.desk
            assert run.outcome is not None and run.shape is not None and self.events is not None
            outcome = replace(run.outcome, events=self.events)
            results = await shaped(run.shape, outcome, in_thread=True)
            where, piece = run.where, run.piece
            if self.step.started.get(where.uri) == self.number:  # (else newer results show)
                desk.ran_again(where.uri, where.text.version, piece.first, piece.last)
                desk.keep(where.uri, where.text.version, results)
                desk.done()
            again = run.entry(outcome, results)
            self.step.session.amended(where.folder, where.settings, run.run_id, again)
