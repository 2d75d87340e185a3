"""The run flow, one for the editor, agents and `runfix run`: running, generating,
installing, and the trust gate in front of a kernel.

Running: the pieces (cells, or the lines of a range) of the text as it stood
when the run was asked for, one folder's runs at a time, stopping at the first
that fails; results are stored and published after each piece.

Fixing lives in `fix.flow.FixFlow` (`Flow.fixes`): the model writes a candidate, it
runs where the failing piece stands, and only a candidate that ran clean is applied.
Generating writes a prompt's body; model-written code the scan flags needs the user's
"Run" before it runs in the local kernel; in the sandbox the container is the control.

The flow talks to the editor only through `editor.Editor`, and to everything
else through the `session.Session`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from pathlib import Path

from executor.base import ExecutorState, ExecutorUnavailable
from executor.events import Display, RunOutcome, RunRequest, RunStatus, Value, Variable
from executor.jupyter import Kernel
from executor.safety import Finding
from lsp_server.contract import (
    InstallAnswer,
    Range,
    RunAnswer,
    Status,
)
from lsp_server.editor import (
    SHOWN_TEXT,
    Editor,
    Level,
    Place,
    Snapshot,
    lines_match,
)
from lsp_server.fix.fixing import (
    user_module,
)
from lsp_server.fix.flow import FixFlow
from lsp_server.gate import Gate
from lsp_server.generate import Generator
from lsp_server.model.context import (
    error_text,
)
from lsp_server.outputs.bundles import OutputFiles
from lsp_server.record.store import RESTORE_RUNS, RecordedRun, entry, ran_text, restored
from lsp_server.results import DocumentResults, Problem, build
from lsp_server.runs import (
    EVERY_PIECE,
    Piece,
    PieceRun,
    RunMode,
    output_files,
    pieces_for,
    run_request,
)
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.text.cells import cell_at, code_of, split_cells
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.positions import strip_eol

log = logging.getLogger(__name__)

EDIT_ARRIVAL = 5.0  # seconds to wait for the editor's didChange after an applied edit
QUEUE_REPORTS = 0.25  # seconds between looks at what a queued run waits for
INSTALL_ANYWAY = "Install"
NO_INSTALL = "Don't install"


def _run_answer(status: RunStatus | Status, began: float, message: str | None = None) -> RunAnswer:
    if isinstance(status, RunStatus):
        status = Status.ERROR if status == RunStatus.DIED else Status(status.value)
    return RunAnswer(status, round((time.perf_counter() - began) * 1000, 3), message)


def _safety_problems(findings: Sequence[Finding], lines: Sequence[str]) -> list[Problem]:
    out = []
    for f in findings:
        first, last = f.line - 1, f.end_line - 1
        message = f"runfix safety: model-written code {f.message}"
        source = tuple(strip_eol(line) for line in lines[first : last + 1])
        out.append(Problem(first, last, message, "warning", message, kind="safety", source=source))
    return out


def _rich(outcome: RunOutcome) -> bool:
    """Whether a run showed more than text (images, HTML, …: files to store)."""
    return any(
        isinstance(e, (Display, Value)) and any(m != "text/plain" for m in e.data)
        for e in outcome.events
    )


class Flow:
    """Runs, fixes, generations and installs for any editor: what a command asks, done."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session = session
        self.editor = editor
        self.gate = Gate(session, editor)
        """Trust before a kernel, confirmation before flagged code (`gate`)."""
        self.generator = Generator(self)
        """Writing a prompt's body (`generate`)."""
        self.fixes = FixFlow(self)
        """Run and fix, fixing a piece (`fix.flow`)."""
        self._doing: dict[Path, str] = {}
        """What a folder's run in progress waits for, for the runs queued behind it."""

    # -- reading ------------------------------------------------------------------------

    def text(self, uri: str) -> Snapshot:
        """The document now; a closed one reads as empty."""
        return self.editor.text(uri) or Snapshot(0, ())

    async def settings_for(self, uri: str) -> Settings:
        return await self.session.settings(self.editor.folder_for(uri))

    async def variables(self, uri: str) -> list[Variable]:
        """The kernel's variables if it is up; none rather than waiting on a start or a run."""
        kernel = self.session.kernels.find(self.editor.folder_for(uri))
        if kernel is None or kernel.state not in (ExecutorState.IDLE, ExecutorState.BUSY):
            return []
        try:
            return await asyncio.wait_for(kernel.variables(), 10)
        except Exception as exc:
            log.warning("could not read the kernel's variables: %s", exc)
            return []

    def error_text_for(self, uri: str, piece: tuple[int, ...], message: str) -> str:
        """The traceback of the error a fix is for (from the stored results), else its message."""
        problem = self._problem_for(uri, piece, message)
        return error_text(problem.message, problem.text) if problem is not None else message

    def raised_for(self, uri: str, piece: tuple[int, ...], message: str) -> int | None:
        """The line the error a fix is for was raised on (its diagnostic's line: the
        innermost frame in the document), where the stored results know it."""
        problem = self._problem_for(uri, piece, message)
        return problem.first if problem is not None else None

    def module_for(self, uri: str, piece: tuple[int, ...], message: str) -> tuple[Path, int] | None:
        """The module file of the folder (and its line) the error was raised in, where the
        diagnostic names one ("raised in …")."""
        problem = self._problem_for(uri, piece, message)
        folder = self.editor.folder_for(uri)
        for related in reversed(problem.related if problem is not None else ()):
            if related.path and (module := user_module(related.path, folder)) is not None:
                return module, related.line
        return None

    def _problem_for(self, uri: str, piece: tuple[int, ...], message: str) -> Problem | None:
        for problem in self.session.store.get(uri).problems:
            if problem.kind == "run" and problem.piece == piece and problem.message == message:
                return problem
        return None

    # -- results ------------------------------------------------------------------------

    def keep(self, uri: str, version: int, results: DocumentResults) -> None:
        """Store results made from `version` (moved through later edits), and publish."""
        now = self.editor.text(uri)
        if now is None:
            return  # closed while it ran: its results went with it
        self.session.store.add(uri, version, results, now.lines)
        self.editor.published(uri, results)

    async def record_id(self, uri: str, ticket: int | None) -> int | None:
        """The run record's id of a run recorded with `ticket` (None: not recorded)."""
        folder = self.editor.folder_for(uri)
        record = self.session.existing_record(folder, await self.session.settings(folder))
        return record.id_for(ticket) if record is not None else None

    def say_if_stale_above(self, uri: str, line: int) -> None:
        """A fix is made against the kernel's state: say so when code above the error at
        `line` changed (edited, or run again) after the error was made."""
        results = self.session.store.get(uri)
        problem = results.problem_at(line)
        front = results.stale(problem) if problem is not None and results.fronts else None
        if front is not None:
            self.editor.tell(
                f"runfix: the code above line {line + 1} changed after this error "
                f"({front.reason}): the kernel's state is not what the file says. "
                "Run the cells above again (runfix: Run Cells Above) before trusting a fix.",
                Level.WARNING,
                Place(uri, line),
            )

    async def restore(self, uri: str) -> None:
        """A document opened: the results its unchanged code had (`record.restored`).

        Not in a folder whose code may not run yet: its record came with the repository
        as far as anyone knows, and a repository's record can say anything."""
        text = self.editor.text(uri)
        if text is None or self.session.store.get(uri).statements:
            return
        folder = self.editor.folder_for(uri)
        settings = await self.session.settings(folder)
        if not self.session.may_start(folder, settings):
            return
        record = self.session.existing_record(folder, settings)
        if record is None:
            return  # nothing ran here yet: opening a file creates nothing in the folder
        runs = record.recent(self.editor.path_of(uri), RESTORE_RUNS)
        now = self.editor.text(uri)
        if not runs or now is None or self.session.store.get(uri).statements:
            return
        results = restored(runs, now.lines, folder)
        if results.statements:
            self.keep(uri, now.version, results)
            self.editor.runs_done()

    def mark_findings(self, uri: str, version: int, findings: list[Finding]) -> None:
        now = self.editor.text(uri)
        if now is None or not findings:
            return
        self.keep(uri, version, DocumentResults(problems=_safety_problems(findings, now.lines)))

    def explain_unavailable(self, uri: str, message: str) -> None:
        """A message, and an Error diagnostic on the document's first line, saying what to fix."""
        self.editor.tell_once(message, Level.ERROR)
        now = self.editor.text(uri)
        if now is None:
            return
        first = strip_eol(now.lines[0]) if now.lines else ""
        problem = Problem(0, 0, message, "error", message, source=(first,))
        self.session.store.add(uri, now.version, DocumentResults(problems=[problem]), now.lines)
        self.editor.published(uri, DocumentResults(problems=[problem]))

    # -- running --------------------------------------------------------------------------

    async def locked(self, folder_uri: str, cancel: asyncio.Event) -> asyncio.Lock | None:
        """The folder's run lock, held; None if cancelled while waiting for it."""
        folder = self.editor.folder_for(folder_uri)
        lock = self.session.run_lock(folder)
        if not lock.locked():  # free: taken at once, without a task to watch `cancel`
            await lock.acquire()
            return lock
        # Queued: the progress says behind what (a run waiting for input() can take long).
        acquired = asyncio.ensure_future(lock.acquire())
        cancelled = asyncio.ensure_future(cancel.wait())
        said: str | None = None
        try:
            async with self.editor.progress(cancel) as progress:
                while not acquired.done():
                    doing = self._doing.get(folder, "")
                    if doing != said:
                        why = f" ({doing})" if doing else ""
                        progress.report(f"Waiting for the folder's run in progress{why}")
                        said = doing
                    await asyncio.wait({acquired, cancelled}, timeout=QUEUE_REPORTS)
                    if cancelled.done() and not acquired.done():
                        return None
        finally:
            cancelled.cancel()
            acquired.cancel()  # (a no-op once it holds the lock)
        return lock

    async def run(
        self,
        uri: str,
        line_range: Range | None,
        cancel: asyncio.Event,
        mode: RunMode = EVERY_PIECE,
        runs: list[PieceRun] | None = None,
    ) -> RunAnswer:
        """Run the range's lines, or every cell `mode` takes (below a line, above one,
        starting within line spans), stopping at the first that fails.

        What runs is the text as it stood when the run was asked for, each piece whole,
        however the document changes meanwhile; results land through the edits made
        since (or are dropped where their lines changed). Each piece that ran is
        appended to `runs` when given (the fix loop reads them)."""
        began = time.perf_counter()
        asked_at = asyncio.get_running_loop().time()
        text = self.text(uri)
        folder = self.editor.folder_for(uri)
        settings = await self.session.settings(folder)
        pieces = [
            p for p in pieces_for(text.lines, line_range, settings.prompt_markers) if mode.takes(p)
        ]
        if not pieces:
            return _run_answer(Status.OK, began)
        flagged = {p: self.session.store.get(uri).safety_in(p.first, p.last) for p in pieces}
        kernel = await self.gate.kernel(uri, pieces[0].first)
        if kernel is None:
            return _run_answer(Status.CANCELLED, began, "not run: the folder is not trusted")
        lock = await self.locked(uri, cancel)
        if lock is None:
            return _run_answer(Status.CANCELLED, began)
        status = RunStatus.OK
        why = ""
        files = output_files(folder, settings)  # outputs.maxRunMB is for the whole run
        try:
            async with self.editor.progress(cancel) as progress:
                for number, piece in enumerate(pieces, 1):
                    if len(pieces) > 1:
                        share = (number - 1) * 100 // len(pieces)
                        progress.report(f"Running cell {number}/{len(pieces)}", share)
                    ran = await self.run_piece(
                        uri,
                        text,
                        piece,
                        kernel,
                        settings,
                        cancel,
                        flagged[piece],
                        asked_at,
                        files,
                        mode.origin,
                    )
                    if isinstance(ran, str):
                        return _run_answer(Status.CANCELLED, began, ran)
                    if runs is not None:
                        runs.append(ran)
                    status = ran.outcome.status
                    why = ran.outcome.note if status == RunStatus.CANCELLED else ""
                    if status != RunStatus.OK:
                        if mode.say_stop and number < len(pieces):
                            left = len(pieces) - number
                            self.editor.remark(Place(uri), f"stopped; {left} later cell(s) not run")
                        break
        except ExecutorUnavailable as exc:
            self.explain_unavailable(uri, str(exc))
            return _run_answer(Status.ERROR, began, str(exc))
        finally:
            lock.release()
        self.editor.runs_done()
        return _run_answer(status, began, why or None)

    async def run_piece(
        self,
        uri: str,
        text: Snapshot,
        piece: Piece,
        kernel: Kernel,
        settings: Settings,
        cancel: asyncio.Event,
        flagged: list[Problem],
        asked_at: float | None = None,
        files: OutputFiles | None = None,
        origin: str = "user",
    ) -> PieceRun | str:
        """Run one piece of `text`, keeping its results (rich outputs in `files`: by default
        within a run's limit of their own); a str: why it did not run.

        Model-written code the scan flagged (`flagged`) runs only once the user confirms."""
        code = code_of(text.lines, piece.first, piece.last)
        if flagged:
            reasons = "; ".join(dict.fromkeys(p.message for p in flagged))
            reason = f"The model-written code at line {flagged[0].first + 1} {reasons}."
            if not await self.gate.confirm_run(
                code, reason, settings, Place(uri, flagged[0].first)
            ):
                return "not run: model-written code was flagged and the run was not confirmed"
        self.session.store.clear_made_at(uri, text.version, piece.first, piece.last)
        path = self.editor.path_of(uri)
        outcome = await kernel.execute(
            run_request(settings, path, code, piece.first),
            cancel=cancel,
            asked_at=asked_at,
            ask_input=(
                self._asker(self.editor.folder_for(uri), f"{path}:{piece.first + 1}", settings)
                if self.editor.features.input and not origin.startswith("agent")
                else None  # (an agent's run: nobody at the editor waits to answer it)
            ),
            on_output=self.editor.live(uri),
        )
        folder = self.editor.folder_for(uri)
        making = functools.partial(
            build,
            outcome,
            path=path,
            lines=text.lines,
            fallback_line=piece.first,
            folder=folder,
            piece=(piece.first, piece.last),
            files=files or output_files(folder, settings),
            ran=ran_text(outcome) + (f" · by {origin}" if origin.startswith("agent") else ""),
        )
        # Rich outputs are decoded and stored as files: off the loop, which keeps answering
        # (a cell that shows 4,000 images); plain text is made at once.
        results = await asyncio.to_thread(making) if _rich(outcome) else making()
        self.keep(uri, text.version, results)
        recorded = entry(path, (piece.first, piece.last), code, origin, outcome, results)
        run_id = self.record(folder, settings, recorded)
        return PieceRun(piece, outcome, text.lines, text.version, run_id)

    def _asker(
        self, folder: Path, where: str, settings: Settings
    ) -> Callable[[str, bool], Awaitable[str | None]]:
        """The code's `input()` asked through the editor, within `inputTimeout`; meanwhile
        the runs queued behind it say what they wait for."""

        async def ask(prompt: str, password: bool) -> str | None:
            self._doing[folder] = f"it waits for input() at {where}"
            try:
                return await self.editor.ask_input(prompt, password, settings.input_timeout)
            finally:
                self._doing.pop(folder, None)

        return ask

    def record(self, folder: Path, settings: Settings, run: RecordedRun) -> int | None:
        """Add a run to the folder's record; its ticket (None: not recorded)."""
        run_id = self.session.recorded(folder, settings, run)
        for message in self.session.record(folder, settings).told_once():
            self.editor.tell(f"runfix: {message}", Level.WARNING)
        return run_id

    async def run_cells(self, uri: str, line: int, which: str, cancel: asyncio.Event) -> RunAnswer:
        """Cells around the one holding `line`: `above` (the cells before it), `below` (it
        and the cells after it), `dependents` (the cells below that read what it defines,
        transitively, in file order: `dataflow`), or `to` (restart the kernel, then every
        cell up to and including it: the state a fresh notebook would have there)."""
        if which == "dependents":
            return await self.run_dependents(uri, line, cancel)
        text = self.text(uri)
        settings = await self.settings_for(uri)
        cell = cell_at(split_cells(text.lines, settings.prompt_markers), line)
        if cell is None:
            return RunAnswer(Status.OK, 0)
        if which == "above":
            return await self.run(uri, None, cancel, RunMode(before=cell.first))
        if which == "below":
            return await self.run(uri, None, cancel, RunMode(after=cell.first - 1))
        kernel = await self.gate.kernel(uri, line)
        if kernel is None:
            return RunAnswer(Status.CANCELLED, 0, "not run: the folder is not trusted")
        await kernel.restart()
        self.editor.tell_once("runfix: kernel restarted; its state was cleared.", Level.INFO)
        return await self.run(uri, None, cancel, RunMode(before=cell.last + 1))

    async def run_dependents(
        self, uri: str, line: int, cancel: asyncio.Event, *, with_above: bool = False
    ) -> RunAnswer:
        """The cells below the one holding `line` that read what it defines, directly or
        through the cells between, in file order (`with_above`: first every cell up to and
        including it, as a fresh kernel needs: `runfix run --dependents-of`)."""
        flow = DocumentMap(self.text(uri).lines)
        index = flow.index(line)
        cells = [flow.bounds(i) for i in flow.dependents(index)]
        if not cells and not with_above:
            where = Place(uri, flow.bounds(index)[0])
            self.editor.remark(where, "no cell below reads what this cell defines")
            return RunAnswer(Status.OK, 0)
        if with_above:
            cells = [flow.bounds(i) for i in range(index + 1)] + cells
        return await self.run(uri, None, cancel, RunMode(within=tuple(cells)))

    async def shown(self, uri: str, first: int, code: str) -> int | None:
        """Wait until the document holds `code` at line `first`; its version then, else None."""
        want = code.rstrip("\n").split("\n")
        deadline = time.monotonic() + EDIT_ARRIVAL
        while time.monotonic() < deadline:
            now = self.editor.text(uri)
            if now is None:
                return None
            if lines_match(now.lines[first : first + len(want)], want):
                return now.version
            await asyncio.sleep(0.01)
        return None

    # -- install --------------------------------------------------------------------------

    async def install(
        self,
        uri: str,
        packages: list[str],
        rerun: Range | None,
        cancel: asyncio.Event,
        ask: str | None = None,
    ) -> InstallAnswer:
        """Install distributions into the folder's kernel; then re-run what failed. With
        `ask` (why no data vouches for the name), only once the user says so."""
        if ask is not None:
            shown = ", ".join(packages)
            message = (
                f"runfix: install {shown}? {ask[:1].upper()}{ask[1:]}; a package of that name "
                "may be someone else's. Check its page on PyPI first."
            )
            if await self.editor.choose(message, (INSTALL_ANYWAY, NO_INSTALL)) != INSTALL_ANYWAY:
                return InstallAnswer(Status.CANCELLED, f"not installed: {shown} was not confirmed")
        kernel = await self.gate.kernel(uri, rerun.start.line if rerun else None)
        shown = " ".join(packages)
        if kernel is None:
            return InstallAnswer(Status.CANCELLED, "not installed: the folder is not trusted")

        def failed(message: str, output: str | None = None) -> InstallAnswer:
            self.editor.tell(message, Level.ERROR)
            return InstallAnswer(Status.ERROR, message, output)

        if (why := kernel.install_blocked()) is not None:
            return failed(f"runfix: cannot install {shown}. {why}")
        try:
            async with self.editor.progress(cancel) as progress:
                progress.report(f"Installing {shown}")
                result = await kernel.install(
                    packages,
                    on_line=lambda line: progress.report(
                        f"Installing {shown}: {line[-SHOWN_TEXT:]}"
                    ),
                    cancel=cancel,
                )
        except ExecutorUnavailable as exc:
            return failed(f"runfix: cannot install {shown}: {exc}")
        if result.cancelled:
            return InstallAnswer(Status.CANCELLED)
        if not result.ok:
            tail = "\n".join(result.output.strip().splitlines()[-5:])
            return failed(f"runfix: installing {shown} failed:\n{tail}", result.output)
        self.editor.tell(f"runfix: installed {shown}.", Level.INFO)
        if rerun is None:
            return InstallAnswer(Status.OK)
        with suppress(Exception):
            await kernel.execute(
                RunRequest("import importlib\nimportlib.invalidate_caches()\n", "<runfix>", 1, 30)
            )
        return InstallAnswer(Status.OK, run=await self.run(uri, rerun, cancel))
