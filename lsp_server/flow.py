"""The run flow, one for the editor, agents and `runfix run`: running, generating,
installing, and the trust gate in front of a kernel.

Running: the pieces (cells, or the lines of a range) of the text as it stood
when the run was asked for, one folder's runs at a time, stopping at the first
that fails; results are stored and published after each piece.

Fixing lives in `fix.flow.FixFlow` (`Flow.fixes`): the model writes a candidate, it
runs where the failing piece stands, and only a candidate that ran clean is applied.
Generating writes a prompt's body; model-written code the scan flags needs the user's
"Run" before it runs in the local kernel; in the sandbox the container is the control.

Every request comes with its document's context (`runs.Where`, made once at the front
end's door by `Flow.where`); every piece runs through the `runner.Runner`. The flow talks
to the editor only through `editor.Editor`, and to everything else through the
`session.Session`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from executor.base import ExecutorState, ExecutorUnavailable
from executor.events import RunRequest, RunStatus, Variable
from executor.jupyter import Kernel
from executor.safety import Finding
from lsp_server.contract import InstallAnswer, Range, RunAnswer, Status
from lsp_server.editor import SHOWN_TEXT, Editor, Level, Place, Snapshot, lines_match
from lsp_server.fix import fixcheck
from lsp_server.fix.flow import FixFlow
from lsp_server.gate import Gate
from lsp_server.generate import Generator
from lsp_server.outputs.results import DocumentResults, Problem
from lsp_server.record.store import RESTORE_RUNS, restored
from lsp_server.runner import SAFETY, PieceRun, Runner
from lsp_server.runs import EVERY_PIECE, RunMode, Where
from lsp_server.session import Session, may_start
from lsp_server.text.cells import cell_at, split_cells
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.languages import is_python
from lsp_server.text.positions import strip_eol

log = logging.getLogger(__name__)
_T = TypeVar("_T")

EDIT_ARRIVAL = 5.0  # seconds to wait for the editor's didChange after an applied edit
INVALIDATE_CACHES = "import importlib\nimportlib.invalidate_caches()\n"
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
        message = f"{SAFETY}{f.message}"
        source = tuple(strip_eol(line) for line in lines[first : last + 1])
        out.append(Problem(first, last, message, "warning", message, kind="safety", source=source))
    return out


class Flow:
    """Runs, fixes, generations and installs for any editor: what a command asks, done."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session = session
        self.editor = editor
        self.gate = Gate(session, editor)
        """Trust before a kernel, confirmation before flagged code (`gate`)."""
        self.runner = Runner(session, editor, self.gate)
        """Where every piece runs, its results kept and recorded (`runner`)."""
        self.generator = Generator(self)
        """Writing a prompt's body (`generate`)."""
        self.fixes = FixFlow(self)
        """Run and fix, fixing a piece (`fix.flow`)."""

    # -- reading ------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every kernel (the fix checks' throwaway ones too) and close the model clients."""
        await asyncio.gather(self.session.close(), fixcheck.ended())

    async def where(self, uri: str) -> Where:
        """The document's context for one request: its folder, the folder's settings (the
        trust decision applied) and its text now. The only place the core looks them up."""
        folder = self.editor.folder_for(uri)
        settings, choice = await self.session.decided_settings(folder)
        path, language = self.editor.path_of(uri), self.editor.language_of(uri)
        return Where(uri, path, folder, settings, self.text(uri), language, choice)

    def text(self, uri: str) -> Snapshot:
        """The document now; a closed one reads as empty."""
        return self.editor.text(uri) or Snapshot(0, ())

    def now(self, where: Where) -> Where:
        """The same context over the document's text as it is now (after an edit)."""
        return where.now(self.text(where.uri))

    async def variables(self, where: Where) -> list[Variable]:
        """The kernel's variables if it is up (`_read`): R's too (listed by R)."""
        return await self._read(where, "the kernel's variables", _variables, True) or []

    async def evidence(self, where: Where, ename: str, line: int) -> Mapping[str, Any] | None:
        """What the frames of the kernel's last error held, if it is `ename` raised on `line`
        (`Kernel.evidence`), if the kernel is up (`_read`)."""
        return await self._read(
            where, "what the kernel held", lambda kernel: kernel.evidence(ename, line)
        )

    async def _read(
        self,
        where: Where,
        what: str,
        read: Callable[[Kernel], Awaitable[_T]],
        any_language: bool = False,
    ) -> _T | None:
        """A read of the document's kernel: None rather than waiting on a start (nor from
        another language's kernel, unless `any_language`: runfix's helper is Python)."""
        language = where.language
        if language is None or not (any_language or is_python(language)):
            return None
        kernel = self.session.kernels.find(where.folder, language.id)
        if kernel is None or kernel.state not in (ExecutorState.IDLE, ExecutorState.BUSY):
            return None
        try:
            return await asyncio.wait_for(read(kernel), 10)
        except Exception as exc:
            log.warning("could not read %s: %s", what, exc)
            return None

    # -- results ------------------------------------------------------------------------

    def record_id(self, where: Where, ticket: int | None) -> int | None:
        """The run record's id of a run recorded with `ticket` (None: not recorded)."""
        record = self.session.existing_record(where.folder, where.settings)
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

    async def restore(self, where: Where) -> None:
        """A document opened: the results its unchanged code had (`record.restored`).

        Not in a folder whose code may not run yet: its record came with the repository
        as far as anyone knows, and a repository's record can say anything."""
        uri, folder = where.uri, where.folder
        if self.editor.text(uri) is None or self.session.store.get(uri).statements:
            return
        if not may_start(where.settings, where.choice):
            return
        record = self.session.existing_record(folder, where.settings)
        if record is None:
            return  # nothing ran here yet: opening a file creates nothing in the folder
        runs = record.recent(where.path, RESTORE_RUNS)
        now = self.editor.text(uri)
        if not runs or now is None or self.session.store.get(uri).statements:
            return
        results = restored(runs, now.lines, folder)
        if results.statements:
            self.runner.keep(uri, now.version, results)
            self.editor.runs_done()

    def mark_findings(self, uri: str, version: int, findings: list[Finding]) -> None:
        now = self.editor.text(uri)
        if now is None or not findings:
            return
        problems = _safety_problems(findings, now.lines)
        self.runner.keep(uri, version, DocumentResults(problems=problems))

    def explain_unavailable(self, uri: str, message: str) -> None:
        """A message, and an Error diagnostic on the document's first line, saying what to fix."""
        self.editor.tell_once(message, Level.ERROR)
        now = self.editor.text(uri)
        if now is None:
            return
        first = strip_eol(now.lines[0]) if now.lines else ""
        problem = Problem(0, 0, message, "error", message, source=(first,))
        self.runner.keep(uri, now.version, DocumentResults(problems=[problem]))

    # -- running --------------------------------------------------------------------------

    async def run(
        self,
        where: Where,
        line_range: Range | None,
        cancel: asyncio.Event,
        mode: RunMode = EVERY_PIECE,
        runs: list[PieceRun] | None = None,
    ) -> RunAnswer:
        """Run the range's lines, or every cell `mode` takes (below a line, above one,
        starting within line spans), stopping at the first that fails.

        What runs is `where.text` (the text as it stood when the run was asked for), each
        piece whole, however the document changes meanwhile; results land through the
        edits made since (or are dropped where their lines changed). Each piece that ran
        is appended to `runs` when given (the fix loop reads them)."""
        began = time.perf_counter()
        asked_at = asyncio.get_running_loop().time()
        pieces = mode.pieces(where, line_range)
        if not pieces:
            return _run_answer(Status.OK, began)
        try:
            admitted = await self.gate.admit(where, pieces[0].first)
            if admitted is None:
                return _run_answer(Status.CANCELLED, began, "not run: the folder is not trusted")
            ran = await self.runner.run_pieces(
                admitted.where, pieces, admitted.kernel, cancel, mode, asked_at
            )
        except ExecutorUnavailable as exc:
            self.explain_unavailable(where.uri, str(exc))
            return _run_answer(Status.ERROR, began, str(exc))
        if runs is not None:
            runs.extend(ran.pieces)
        if ran.stopped is not None:
            return _run_answer(Status.CANCELLED, began, ran.stopped or None)
        self.editor.runs_done()
        outcome = ran.pieces[-1].outcome
        why = outcome.note if outcome.status == RunStatus.CANCELLED else ""
        return _run_answer(outcome.status, began, why or None)

    async def run_cells(
        self, where: Where, line: int, which: str, cancel: asyncio.Event
    ) -> RunAnswer:
        """Cells around the one holding `line`: `above` (the cells before it), `below` (it
        and the cells after it), `dependents` (the cells below that read what it defines,
        transitively, in file order: `dataflow`), or `to` (restart the kernel, then every
        cell up to and including it: the state a fresh notebook would have there)."""
        if which == "dependents":
            return await self.run_dependents(where, line, cancel)
        cell = cell_at(split_cells(where.text.lines, where.settings.prompt_markers), line)
        if cell is None:
            return RunAnswer(Status.OK, 0)
        if which == "above":
            return await self.run(where, None, cancel, RunMode(before=cell.first))
        if which == "below":
            return await self.run(where, None, cancel, RunMode(after=cell.first - 1))
        try:
            admitted = await self.gate.admit(where, line)
        except ExecutorUnavailable as exc:
            self.explain_unavailable(where.uri, str(exc))
            return RunAnswer(Status.ERROR, 0, str(exc))
        if admitted is None:
            return RunAnswer(Status.CANCELLED, 0, "not run: the folder is not trusted")
        await admitted.kernel.restart()
        self.editor.tell_once("runfix: kernel restarted; its state was cleared.", Level.INFO)
        return await self.run(admitted.where, None, cancel, RunMode(before=cell.last + 1))

    async def run_dependents(
        self, where: Where, line: int, cancel: asyncio.Event, *, with_above: bool = False
    ) -> RunAnswer:
        """The cells below the one holding `line` that read what it defines, directly or
        through the cells between, in file order (`with_above`: first every cell up to and
        including it, as a fresh kernel needs: `runfix run --dependents-of`)."""
        python = is_python(where.language)
        flow = DocumentMap(where.text.lines, python=python)
        index = flow.index(line)
        cells = [flow.bounds(i) for i in flow.dependents(index)] if python else []
        if not cells and not with_above:
            place = Place(where.uri, flow.bounds(index)[0])
            said = "no cell below reads what this cell defines"
            if not python:
                said = "which cells read what a cell defines is known for Python documents only"
            self.editor.remark(place, said)
            return RunAnswer(Status.OK, 0)
        if with_above:
            cells = [flow.bounds(i) for i in range(index + 1)] + cells
        return await self.run(where, None, cancel, RunMode(within=tuple(cells)))

    async def shown(self, where: Where, first: int, code: str) -> Where | None:
        """Wait until the document holds `code` at line `first`: the context over its text
        then, else None."""
        want = code.rstrip("\n").split("\n")
        deadline = time.monotonic() + EDIT_ARRIVAL
        while time.monotonic() < deadline:
            now = self.editor.text(where.uri)
            if now is None:
                return None
            if lines_match(now.lines[first : first + len(want)], want):
                return where.now(now)
            await asyncio.sleep(0.01)
        return None

    # -- install --------------------------------------------------------------------------

    async def install(
        self,
        where: Where,
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
        shown = " ".join(packages)
        try:
            admitted = await self.gate.admit(where, rerun.start.line if rerun else None)
        except ExecutorUnavailable as exc:
            self.explain_unavailable(where.uri, str(exc))
            return InstallAnswer(Status.ERROR, str(exc))
        if admitted is None:
            return InstallAnswer(Status.CANCELLED, "not installed: the folder is not trusted")
        kernel = admitted.kernel

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
            await self.runner.quietly(kernel, RunRequest(INVALIDATE_CACHES, "<runfix>", 1, 30))
        return InstallAnswer(Status.OK, run=await self.run(self.now(where), rerun, cancel))


async def _variables(kernel: Kernel) -> list[Variable]:
    return await kernel.variables()
