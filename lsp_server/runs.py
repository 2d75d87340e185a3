"""Running a document (or some of its lines) and keeping what came back.

`run_document` is the one place that turns `runfix.run` into executor calls:
it picks the pieces (cells, or the lines of a range), queues behind other runs
of the folder, shows progress for runs longer than a moment, stops at the
first piece that fails, and stores and publishes results after each piece.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from executor.base import ExecutorUnavailable
from executor.events import RunOutcome, RunRequest, RunStatus
from executor.jupyter import JupyterKernel
from lsp_server.cells import code_of, split_cells
from lsp_server.results import DocumentResults, Problem, build
from lsp_server.server import RunfixServer
from lsp_server.settings import Settings

log = logging.getLogger(__name__)

PROGRESS_DELAY = 0.3  # seconds: quicker runs show no progress at all
_tokens = itertools.count(1)


@dataclass(frozen=True)
class Piece:
    """Lines first..last (0-based, inclusive) to run as one execute request."""

    first: int
    last: int


def pieces_for(
    lines: Sequence[str], line_range: lsp.Range | None, prompt_markers: Sequence[str] = ()
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
    return bool(text) and not text.startswith("#")


def parse_run_arguments(args: Sequence[Any]) -> tuple[str, lsp.Range | None]:
    """`[{"uri": ..., "range": <optional LSP Range>}]` → (uri, range); ValueError if malformed."""
    if len(args) != 1 or not isinstance(args[0], dict):
        raise ValueError('expected one argument: {"uri": <document uri>, "range": <optional>}')
    arg = args[0]
    uri = arg.get("uri")
    if not isinstance(uri, str) or not uri:
        raise ValueError('"uri" must be a document URI')
    raw = arg.get("range")
    if raw is None:
        return uri, None
    try:
        start, end = raw["start"], raw["end"]
        rng = lsp.Range(
            lsp.Position(int(start["line"]), int(start["character"])),
            lsp.Position(int(end["line"]), int(end["character"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f'"range" must be an LSP Range: {exc}') from None
    if rng.start.line < 0 or (rng.end.line, rng.end.character) < (
        rng.start.line,
        rng.start.character,
    ):
        raise ValueError('"range" must not end before it starts')
    return uri, rng


class Progress:
    """Work-done progress that appears only if the run lasts; cancelling it cancels the run."""

    def __init__(self, server: RunfixServer, cancel: asyncio.Event) -> None:
        self.server = server
        self.cancel = cancel
        self.token: str | None = None
        self.message = "Running"
        self._starter: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Progress:
        if self.server.supports_progress:
            self._starter = asyncio.ensure_future(self._begin())
        return self

    async def _begin(self) -> None:
        await asyncio.sleep(PROGRESS_DELAY)
        token = f"runfix-run-{next(_tokens)}"
        progress = self.server.work_done_progress
        await progress.create_async(token)
        future = progress.tokens.get(token)
        if future is not None:
            future.add_done_callback(lambda f: self.cancel.set() if f.cancelled() else None)
        progress.begin(
            token,
            lsp.WorkDoneProgressBegin(title="runfix", message=self.message, cancellable=True),
        )
        self.token = token

    def report(self, message: str, percentage: int | None = None) -> None:
        self.message = message
        if self.token is not None:
            self.server.work_done_progress.report(
                self.token, lsp.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    async def __aexit__(self, *exc: object) -> None:
        if self._starter is not None and not self._starter.done():
            self._starter.cancel()
            with contextlib.suppress(BaseException):
                await self._starter
        if self.token is not None:
            self.server.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd())
            self.server.work_done_progress.tokens.pop(self.token, None)


async def acquire(lock: asyncio.Lock, cancel: asyncio.Event) -> bool:
    """Wait for the lock unless cancelled first; True when it is held."""
    if not lock.locked():
        await lock.acquire()
        return True
    acquire = asyncio.ensure_future(lock.acquire())
    cancelled = asyncio.ensure_future(cancel.wait())
    await asyncio.wait({acquire, cancelled}, return_when=asyncio.FIRST_COMPLETED)
    cancelled.cancel()
    if acquire.done() and not acquire.cancelled():
        if cancel.is_set():
            lock.release()
            return False
        return True
    acquire.cancel()
    return False


def _answer(status: RunStatus | str, began: float, **extra: Any) -> dict[str, Any]:
    value = status.value if isinstance(status, RunStatus) else status
    if value == "died":
        value = "error"
    return {"status": value, "durationMs": round((time.perf_counter() - began) * 1000, 3), **extra}


def run_request(
    settings: Settings, path: str, code: str, first: int, timeout: float | None = None
) -> RunRequest:
    """Code standing at line `first` (0-based) of the document `path`, with the settings' limits."""
    return RunRequest(
        code=code,
        filename=path,
        first_line=first + 1,
        timeout=timeout or settings.timeout,
        output_limit=settings.output_limit,
    )


@dataclass
class PieceRun:
    """One piece that ran: where, on which text, and what came back."""

    piece: Piece
    outcome: RunOutcome
    lines: list[str]
    version: int


async def run_document(
    server: RunfixServer,
    uri: str,
    line_range: lsp.Range | None,
    cancel: asyncio.Event,
    *,
    runs: list[PieceRun] | None = None,
) -> dict[str, Any]:
    """Run the range's lines or every cell, in order, stopping at the first that fails.

    What runs is the text as it stood when the run was asked for, each piece whole,
    however the document changes meanwhile; results land through the edits made
    since (or are dropped where their lines changed). Each piece that ran is
    appended to `runs` when given (the fix loop reads them)."""
    began = time.perf_counter()
    asked_at = asyncio.get_running_loop().time()
    doc = server.workspace.get_text_document(uri)
    text = Snapshot(doc.version or 0, tuple(doc.lines))
    folder = server.folder_for(uri)
    settings = await server.settings_for(folder)
    pieces = pieces_for(text.lines, line_range, settings.prompt_markers)
    if not pieces:
        return _answer(RunStatus.OK, began)
    flagged = {p: server.store.get(uri).safety_in(p.first, p.last) for p in pieces}
    kernel = await server.kernel_for(folder)
    lock = server.run_lock(folder)
    if not await acquire(lock, cancel):
        return _answer(RunStatus.CANCELLED, began)
    try:
        async with Progress(server, cancel) as progress:
            status = RunStatus.OK
            for number, piece in enumerate(pieces, 1):
                if len(pieces) > 1:
                    progress.report(
                        f"Running cell {number}/{len(pieces)}", (number - 1) * 100 // len(pieces)
                    )
                ran = await run_piece(
                    server, uri, text, piece, kernel, settings, cancel, flagged[piece], asked_at
                )
                if isinstance(ran, str):
                    return _answer(RunStatus.CANCELLED, began, message=ran)
                if runs is not None:
                    runs.append(ran)
                status = ran.outcome.status
                if status != RunStatus.OK:
                    break
    except ExecutorUnavailable as exc:
        server.explain_unavailable(uri, str(exc))
        return _answer("error", began, message=str(exc))
    finally:
        lock.release()
    server.refresh_inlay_hints()
    return _answer(status, began)


@dataclass(frozen=True)
class Snapshot:
    """A document's text as it stood at one version: what a run runs."""

    version: int
    lines: tuple[str, ...]


async def run_piece(
    server: RunfixServer,
    uri: str,
    text: Snapshot,
    piece: Piece,
    kernel: JupyterKernel,
    settings: Settings,
    cancel: asyncio.Event,
    flagged: list[Problem],
    asked_at: float | None = None,
) -> PieceRun | str:
    """Run one piece of `text`, keeping its results; a str: why it did not run.

    Model-written code the scan flagged (`flagged`) runs only once the user confirms it."""
    version, lines = text.version, list(text.lines)
    code = code_of(lines, piece.first, piece.last)
    if flagged:
        where = f"line {flagged[0].first + 1}"
        reasons = "; ".join(dict.fromkeys(p.message for p in flagged))
        reason = f"The model-written code at {where} {reasons}."
        if not await server.confirm_run(code, reason, settings):
            return "not run: model-written code was flagged and the run was not confirmed"
    server.store.clear_made_at(uri, version, piece.first, piece.last)
    path = server.path_of(uri)
    outcome = await kernel.execute(
        run_request(settings, path, code, piece.first),
        cancel=cancel,
        asked_at=asked_at,
        ask_input=server.ask_input if server.supports_input else None,
    )
    results = build(
        outcome,
        path=path,
        lines=lines,
        fallback_line=piece.first,
        folder=server.folder_for(uri),
        piece=(piece.first, piece.last),
    )
    keep(server, uri, version, results)
    return PieceRun(piece, outcome, lines, version)


def keep(server: RunfixServer, uri: str, version: int, results: DocumentResults) -> None:
    doc = server.workspace.text_documents.get(uri)
    if doc is None:
        return  # closed while it ran: its results went with it
    server.store.add(uri, version, results, doc.lines)
    server.publish(uri)
