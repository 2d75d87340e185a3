"""What happens around a run of a document's pieces (`Runner.run_range`), as an ordered list of
steps (`Runner.range_steps`), as nbclient's hooks around a notebook: each step is around the
whole run (entered in the list's order before the first piece, left in reverse after the
last), and sees each piece before it runs and after. A step stops the run by saying why
(`RangeRun.stop`): the steps after it are not entered, no further piece runs. A new step
joins the list without editing the others; a piece's own run is `services.steps`'.

- `Admitted`: the folder's kernel, once its code may run (`Gate.admit`);
- `Published`: an editor that draws results lazily redraws once pieces ran;
- `Locked`: behind the folder's other runs (queued, the progress says behind what);
- `Progressed`: the run's progress, and which cell of how many runs;
- `Confirmed`: model-written code the scan flagged runs only once the user confirms it;
- `StopSaid`: after a piece failed, the document says the later cells did not run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from executor.events import RunStatus
from executor.jupyter import Kernel
from lsp_server.editor import Editor, Level, Place, Progress
from lsp_server.outputs.results import Problem
from lsp_server.runs import Piece, RunMode, Where
from lsp_server.services.desk import SAFETY, Desk
from lsp_server.services.gate import Gate
from lsp_server.services.queue import FolderQueue
from lsp_server.services.steps import PieceRun
from lsp_server.text.cells import code_of

NOT_TRUSTED = "not run: the folder is not trusted"
NOT_CONFIRMED = "not run: model-written code was flagged and the run was not confirmed"


@dataclass
class RangeRun:
    """One run of a document's pieces as the steps see it."""

    where: Where
    pieces: list[Piece]
    cancel: asyncio.Event
    mode: RunMode
    kernel: Kernel | None = None
    """The folder's kernel (`Admitted`)."""
    progress: Progress | None = None
    ran: list[PieceRun] = field(default_factory=list)
    """Each piece that ran, in order."""
    stopped: str | None = None
    """Why the run went no further than it did ("": cancelled while queued; None: it went
    as far as its pieces did)."""

    def stop(self, why: str) -> None:
        self.stopped = why


class RangeStep(Protocol):
    """One step around a run of a document's pieces."""

    def around(self, run: RangeRun) -> contextlib.AbstractAsyncContextManager[None]:
        """Entered before the first piece (`run.stop`: nothing runs), left after the last."""
        ...

    async def before(self, run: RangeRun, number: int, piece: Piece) -> None:
        """Before piece `number` (1-based) runs (`run.stop`: it and the rest do not)."""

    def after(self, run: RangeRun, number: int, one: PieceRun) -> None:
        """After piece `number` ran."""


class _Step:
    """A step that does nothing where it has nothing to do."""

    @contextlib.asynccontextmanager
    async def around(self, run: RangeRun) -> AsyncIterator[None]:
        yield

    async def before(self, run: RangeRun, number: int, piece: Piece) -> None:
        pass

    def after(self, run: RangeRun, number: int, one: PieceRun) -> None:
        pass


def surrounds(step: RangeStep) -> bool:
    """Whether `step` does anything around a run: one that does not is not entered (an
    empty context cost ~10 µs a run each)."""
    return getattr(type(step), "around", None) is not _Step.around


class Admitted(_Step):
    """The folder's kernel, once its code may run; `ExecutorUnavailable` goes to the runner."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    @contextlib.asynccontextmanager
    async def around(self, run: RangeRun) -> AsyncIterator[None]:
        admitted = await self.gate.admit(run.where, run.pieces[0].first)
        if admitted is None:
            run.stop(NOT_TRUSTED)
        else:
            run.where, run.kernel = admitted.where, admitted.kernel
        yield


class Published(_Step):
    """Once pieces ran, an editor that draws results lazily redraws them."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    @contextlib.asynccontextmanager
    async def around(self, run: RangeRun) -> AsyncIterator[None]:
        yield
        if run.ran:
            self.desk.done()


class Locked(_Step):
    """Behind the folder's other runs; cancelled while queued, nothing runs."""

    def __init__(self, queue: FolderQueue) -> None:
        self.queue = queue

    @contextlib.asynccontextmanager
    async def around(self, run: RangeRun) -> AsyncIterator[None]:
        lock = await self.queue.locked(run.where, run.cancel)
        if lock is None:
            run.stop("")
            yield
            return
        try:
            yield
        finally:
            lock.release()


class Progressed(_Step):
    """The run's progress (cancelling it cancels the run), and which cell of how many."""

    def __init__(self, editor: Editor) -> None:
        self.editor = editor

    @contextlib.asynccontextmanager
    async def around(self, run: RangeRun) -> AsyncIterator[None]:
        async with self.editor.progress(run.cancel) as progress:
            run.progress = progress
            yield

    async def before(self, run: RangeRun, number: int, piece: Piece) -> None:
        count = len(run.pieces)
        if count > 1 and run.progress is not None:
            run.progress.report(f"Running cell {number}/{count}", (number - 1) * 100 // count)


class Confirmed(_Step):
    """Model-written code the scan flagged runs only once the user confirms it
    (`Gate.confirm_run`)."""

    def __init__(self, gate: Gate, desk: Desk, editor: Editor) -> None:
        self.gate, self.desk, self.editor = gate, desk, editor

    async def before(self, run: RangeRun, number: int, piece: Piece) -> None:
        where = run.where
        flagged = self.desk.results(where.uri).safety_in(piece.first, piece.last)
        if flagged and not await self._confirmed(where, piece, flagged):
            run.stop(NOT_CONFIRMED)

    async def _confirmed(self, where: Where, piece: Piece, flagged: list[Problem]) -> bool:
        code = code_of(where.text.lines, piece.first, piece.last)
        reasons = "; ".join(dict.fromkeys(p.message.removeprefix(SAFETY) for p in flagged))
        at = self.editor.line_name(where.uri, flagged[0].first)
        reason = f"The model-written code at {at} {reasons}."
        place = Place(where.uri, flagged[0].first)
        return await self.gate.confirm_run(code, reason, where, place)


class Shared(_Step):
    """The first run of a second document in a folder says that the two share the folder's
    one kernel: a notebook's `def` replaces a file's function of the same name there, and
    nothing else would say so (issue 70, 8)."""

    def __init__(self, editor: Editor) -> None:
        self.editor = editor
        self.ran: dict[tuple[Path, str], list[str]] = {}
        """The documents that ran in each folder's kernel of a language, in order."""

    async def before(self, run: RangeRun, number: int, piece: Piece) -> None:
        where = run.where
        if number != 1 or run.mode.origin != "user":
            return
        language = where.language.id if where.language is not None else ""
        seen = self.ran.setdefault((where.folder, language), [])  # (one kernel a language)
        if where.path in seen:
            return
        if seen:
            others = " and ".join(Path(p).name for p in seen[-2:])
            self.editor.tell(
                f"runfix: {Path(where.path).name} runs in the same kernel as {others}: one "
                f"kernel per folder ({where.folder.name}), so what one defines, the other sees "
                "(and a name defined again replaces the first).",
                Level.INFO,
                Place(where.uri, piece.first),
            )
        seen.append(where.path)


class StopSaid(_Step):
    """After a piece failed with later ones to run, the document says they did not."""

    def __init__(self, editor: Editor) -> None:
        self.editor = editor

    def after(self, run: RangeRun, number: int, one: PieceRun) -> None:
        left = len(run.pieces) - number
        if one.outcome.status != RunStatus.OK and run.mode.say_stop and left > 0:
            self.editor.remark(Place(run.where.uri), f"stopped; {left} later cell(s) not run")
