"""The run flow, one for the editor, agents and `runfix run`: running, generating,
installing, and the trust gate in front of a kernel.

Running: the pieces (cells, or the lines of a range) of the text as it stood
when the run was asked for, one folder's runs at a time, stopping at the first
that fails; results are kept and shown after each piece.

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
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.events import RunRequest, Variable
from executor.jupyter import Kernel
from executor.trust import Choice, resolved
from lsp_server import contract
from lsp_server.contract import (
    FixAnswer,
    GenerateAnswer,
    InstallAnswer,
    Range,
    RunAnswer,
    Status,
)
from lsp_server.editor import Editor, Level, Place
from lsp_server.fix import fixcheck
from lsp_server.fix.flow import FixFlow, FixReport
from lsp_server.gate import Gate
from lsp_server.generate import Generator
from lsp_server.outputs.results import DocumentResults
from lsp_server.outputs.store import LineChange
from lsp_server.record.store import RunRecord
from lsp_server.runner import PieceRun, Runner
from lsp_server.runs import EVERY_PIECE, Piece, RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.installs import Installer
from lsp_server.services.reads import KernelReads
from lsp_server.services.tests import TestRuns
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.testing import is_test_file, test_at
from lsp_server.text.cells import cell_at, split_cells
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.languages import PYTHON, is_python

log = logging.getLogger(__name__)
INVALIDATE_CACHES = "import importlib\nimportlib.invalidate_caches()\n"


class Flow:
    """Runs, fixes, generations and installs for any editor: what a command asks, done."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session = session
        self.editor = editor
        self.desk = Desk(session, editor)
        """What documents show, its one writer; a document's text (`services.desk`)."""
        self.gate = Gate(session, editor, self.desk)
        """Trust before a kernel, confirmation before flagged code (`gate`)."""
        self.runner = Runner(session, editor, self.gate, self.desk)
        """Where every piece runs, its results kept and recorded (`runner`)."""
        self.reads = KernelReads(session)
        """What the kernel holds, for the model (`reads`)."""
        self.installer = Installer(editor, self.gate, self.desk)
        """Installing into the folder's kernel (`installs`)."""
        self.generator = Generator(session, editor, self.runner, self.desk, self.reads)
        """Writing a prompt's body (`generate`)."""
        self.fixes = FixFlow(
            session, editor, self.gate, self.runner, self.desk, self.reads, self.installer
        )
        """Run and fix, fixing a piece (`fix.flow`)."""
        self.tests = TestRuns(session, editor, self.gate, self.desk)
        """The project's tests, their failures on their lines (`services.tests`)."""

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
        where = Where(uri, path, folder, settings, self.desk.text(uri), language, choice)
        self.desk.seen(where)
        return where

    def now(self, where: Where) -> Where:
        """The same context over the document's text as it is now (after an edit)."""
        return self.desk.now(where)

    # -- results ------------------------------------------------------------------------

    async def restore(self, where: Where) -> None:
        """A document opened: the results its unchanged code had (`Desk.restore`)."""
        await self.desk.restore(where)

    def explain_unavailable(self, uri: str, message: str) -> None:
        """No kernel runs the document here: said, and on its first line."""
        self.desk.explain_unavailable(uri, message)

    # -- running --------------------------------------------------------------------------

    async def run(
        self,
        where: Where,
        line_range: Range | None,
        cancel: asyncio.Event,
        mode: RunMode = EVERY_PIECE,
        runs: list[PieceRun] | None = None,
    ) -> RunAnswer:
        """Run the range's lines, or every cell `mode` takes (`Runner.run_range`)."""
        return await self.runner.run_range(where, line_range, cancel, mode, runs)

    def held_by(self, folder: Path, why: str | None) -> None:
        """The folder's run in progress is held (a debugger's stop: `why`), or no longer
        (None): the runs queued behind it say so while they wait."""
        self.runner.doing(folder, why)

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

    # -- fixing and generating -----------------------------------------------------------

    async def run_and_fix(
        self, where: Where, line_range: Range | None, cancel: asyncio.Event
    ) -> FixAnswer:
        """Run; fix the piece that fails and apply the fix (`FixFlow.run_and_fix`)."""
        return await self.fixes.run_and_fix(where, line_range, cancel)

    async def fix_reported(
        self, where: Where, piece: tuple[int, int], message: str, cancel: asyncio.Event, *,
        apply: bool,
    ) -> FixReport:  # fmt: skip
        """Fix the piece whose run raised the error the document shows as `message`."""
        return await self.fixes.fix_reported(where, piece, message, cancel, apply=apply)

    async def generate(
        self, where: Where, line: int, run: bool, cancel: asyncio.Event
    ) -> GenerateAnswer:
        """Write the body of the prompt at `line` (and run it: `run`) (`Generator`)."""
        return await self.generator.generate(where, line, run, cancel)

    # -- the kernel -----------------------------------------------------------------------

    async def variables(self, where: Where) -> list[Variable]:
        """What the document's kernel holds, where its folder's code may run (none is
        started where it may not: nothing is asked)."""
        try:
            admitted = await self.gate.admit(where)
        except ExecutorUnavailable:
            return []  # (said when the document runs)
        if admitted is None:
            return []
        return await admitted.kernel.variables(admitted.where.settings.secret_extra_names)

    def _kernels(self, folder: Path | None, language: str) -> list[Kernel]:
        if folder is None:
            return self.session.kernels.all()
        kernel = self.session.kernels.find(folder, language)
        return [kernel] if kernel is not None else []

    async def interrupt(self, folder: Path | None = None, language: str = PYTHON.id) -> int:
        """Interrupt the folder's kernel of `language` (no folder: every kernel); how many."""
        kernels = self._kernels(folder, language)
        await asyncio.gather(*(k.interrupt() for k in kernels))
        return len(kernels)

    async def restart(self, folder: Path | None = None, language: str = PYTHON.id) -> int:
        """Restart the folder's kernel of `language` (no folder: every kernel); how many."""
        kernels = self._kernels(folder, language)
        await asyncio.gather(*(k.restart() for k in kernels))
        self.editor.tell_once("runfix: kernel restarted; its state was cleared.", Level.INFO)
        return len(kernels)

    async def run_code(
        self, where: Where, piece: Piece, cancel: asyncio.Event, origin: str
    ) -> PieceRun | None:
        """Code in no open document (an agent's), in the folder's kernel behind its runs:
        nothing is kept or shown (`Runner.run_code`)."""
        return await self.runner.run_code(where, piece, cancel, origin)

    # -- trust and agents -----------------------------------------------------------------

    def decide(self, folder: Path, choice: Choice, keep: bool = True) -> None:
        """The user decided how the folder's code runs (`keep`: beyond this session)."""
        self.gate.decided(folder, choice, keep=keep)

    def allow_agents(self, folder: Path) -> None:
        """Agents may run in `folder` without asking (trust still applies)."""
        self.gate.allow_agents(folder)

    async def agent_may_run(self, folder: Path, agent: str) -> str | None:
        """Whether `agent` may run code in the folder's kernel (asked at the editor); None:
        it may, else why not."""
        settings, choice = await self.folder_settings(folder)
        return await self.gate.agent_may_run(folder, settings, choice, agent)

    def agent_may_read(self, folder: Path) -> str | None:
        """Whether an agent may read the folder's kernel (None: it may, else why not)."""
        return self.gate.agent_may_read(folder)

    # -- the project's tests -------------------------------------------------------------

    async def run_tests(self, where: Where, line: int | None, cancel: asyncio.Event) -> RunAnswer:
        """The project's tests (pytest): the test function holding `line` of a test file,
        else the test file's, else (another file) all of the folder's."""
        return await self.tests.run(where, self._tests_at(where, line), cancel)

    async def fix_tests(self, where: Where, line: int | None, cancel: asyncio.Event) -> FixAnswer:
        """The tests `run_tests` would run, then each failure's module function fixed by the
        model, the tests as the check; a fix is applied as an edit of its module."""
        return await self.tests.fix(where, self._tests_at(where, line), cancel)

    @staticmethod
    def _tests_at(where: Where, line: int | None) -> list[str]:
        """pytest's selection for a document's line (none: every test of the folder)."""
        path = Path(where.path)
        if not (is_test_file(path) and path.is_relative_to(where.folder)):
            return []
        relative = path.relative_to(where.folder).as_posix()
        name = test_at(where.text.lines, line) if line is not None else None
        return [f"{relative}::{name}" if name else relative]

    # -- install --------------------------------------------------------------------------

    async def install(
        self,
        where: Where,
        packages: list[str],
        rerun: Range | None,
        cancel: asyncio.Event,
        ask: str | None = None,
    ) -> InstallAnswer:
        """Install distributions into the folder's kernel (`Installer`); then re-run what
        failed. With `ask` (why no data vouches for the name), only once the user says so."""
        line = rerun.start.line if rerun else None
        answer, kernel = await self.installer.install(where, packages, line, cancel, ask)
        if answer.status != Status.OK or rerun is None or kernel is None:
            return answer
        with suppress(Exception):
            await self.runner.quietly(kernel, RunRequest(INVALIDATE_CACHES, "<runfix>", 1, 30))
        return InstallAnswer(Status.OK, run=await self.run(self.now(where), rerun, cancel))

    # -- what the doors ask of the state (they never touch it themselves) ---------------------

    def results(self, uri: str) -> DocumentResults:
        """What the document shows now (read only)."""
        return self.desk.results(uri)

    def shows(self, uri: str) -> bool:
        """Whether the document shows anything of runfix's."""
        return self.desk.shows(uri)

    def edited_above(self, uri: str, line: int) -> str | None:
        """Why what `line` made when it last ran may be stale (code above it edited since)."""
        return self.desk.edited_above(uri, line)

    def dataflow(self, uri: str) -> DocumentMap | None:
        """Which of the document's cells read what another defines, where known."""
        return self.desk.dataflow(uri)

    def edited(
        self, uri: str, version: int, changes: Sequence[LineChange], lines: Sequence[str]
    ) -> None:
        """The document was edited: its results move with the lines (and show where they
        moved)."""
        self.desk.edited(uri, version, changes, lines)

    def shown_on(self, uri: str, first: int, last: int) -> DocumentResults:
        """What lines first..last show, as if they stood from line 0 (read only)."""
        return self.desk.results(uri).lines(first, last, 0)

    def carried(self, uri: str, version: int, shown: DocumentResults) -> None:
        """Lines went elsewhere (a notebook's cell split or joined): what they showed, at the
        lines of `version` they stand on now, shows there again."""
        self.desk.keep(uri, version, shown)

    def replaced(self, uri: str, version: int) -> None:
        """The document's whole text was replaced: nothing it showed stays."""
        self.desk.replaced(uri, version)

    def closed(self, uri: str) -> None:
        self.desk.closed(uri)

    def not_python(self, uri: str) -> None:
        """The document is not Python: nothing of Python's reading of it is shown."""
        self.desk.not_python(uri)

    def clear(self, uri: str) -> None:
        """Drop what the document shows."""
        self.desk.clear(uri)

    def done(self) -> None:
        """Work ended: an editor that draws results lazily redraws them."""
        self.desk.done()

    async def folder_settings(self, folder: Path) -> tuple[Settings, Choice | None]:
        """A folder's settings as its trust decision makes them, and that decision (for a
        door whose request names a folder, not a document: an agent's)."""
        return await self.session.decided_settings(folder)

    def display_settings(self, folder: Path) -> Settings:
        """The folder's settings as far as they say how results show (no trust read)."""
        return self.session.display_settings(folder)

    def cached_settings(self, folder: Path) -> Settings:
        """The folder's settings if known, without asking anyone (for fast handlers)."""
        return self.session.cached_settings(folder)

    def kernels(self) -> list[Kernel]:
        """Every folder's kernels."""
        return self.session.kernels.all()

    def kernel_of(self, folder: Path, language: str = PYTHON.id) -> Kernel | None:
        """The folder's kernel of a language, if it has one (none is made)."""
        return self.session.kernels.find(folder, language)

    def record_of(self, folder: Path, settings: Settings | None = None) -> RunRecord | None:
        """The folder's run record, if it has one and its code may run (an undecided
        folder's record may have come with the repository: it is not read); by `settings`,
        or the folder's as far as they are known."""
        settings = settings or self.session.cached_settings(folder)
        if not self.session.may_start(folder, settings):
            return None
        return self.session.existing_record(folder, settings)

    async def record_for(self, folder: Path) -> RunRecord:
        """The folder's run record, made if it has none."""
        return self.session.record(folder, await self.session.settings(folder))

    async def open_kernel(self, where: Where) -> Kernel | None:
        """The document's kernel as it opens, where its folder's code may already run (no
        question is asked: the first run asks). `ExecutorUnavailable` when none can run it."""
        admitted = await self.gate.admitted_quietly(where)
        return admitted.kernel if admitted is not None else None

    def trust_workspace(self, folders: Sequence[Path]) -> None:
        """The client decided these folders are trusted (VS Code's Workspace Trust)."""
        self.session.decided = Choice.TRUST
        self.session.decided_for = tuple(resolved(f) for f in folders)

    async def settings_changed(self, uris: Sequence[str]) -> None:
        """The client's settings changed: read again; a folder's kernel whose settings now
        say another interpreter is replaced; the documents show their results as the
        settings now say."""
        self.session.forget_settings()
        for uri in uris:
            folder = self.editor.folder_for(uri)
            if self.session.kernels.find(folder) is not None:
                settings = await self.session.settings(folder)  # as the client says them now
                await self.session.kernel_for(folder, settings)  # replaced if they changed
        for uri in uris:
            self.desk.show((await self.where(uri)).uri)  # (its results as they now say)

    async def revoke(self, folder: Path) -> Choice | None:
        """Forget the folder's trust decision (its kernel stops); the decision left."""
        await self.session.revoke(folder)
        return self.session.choice(folder)


COMMANDS: dict[str, str] = {
    contract.RUN: Flow.run.__name__,
    contract.RUN_AND_FIX: Flow.run_and_fix.__name__,
    contract.GENERATE: Flow.generate.__name__,
    contract.FIX_WITH_MODEL: Flow.fix_reported.__name__,
    contract.INSTALL: Flow.install.__name__,
    contract.INTERRUPT: Flow.interrupt.__name__,
    contract.RESTART: Flow.restart.__name__,
    contract.VARIABLES: Flow.variables.__name__,
    contract.CLEAR: Flow.clear.__name__,
    contract.STATUS: Flow.kernels.__name__,
    contract.HISTORY: Flow.record_of.__name__,
    contract.RUN_ABOVE: Flow.run_cells.__name__,
    contract.RUN_BELOW: Flow.run_cells.__name__,
    contract.RUN_DEPENDENTS: Flow.run_cells.__name__,
    contract.RESTART_AND_RUN_TO: Flow.run_cells.__name__,
    contract.TRUST: Flow.decide.__name__,
    contract.UNTRUST: Flow.revoke.__name__,
    contract.RUN_TESTS: Flow.run_tests.__name__,
    contract.FIX_TESTS: Flow.fix_tests.__name__,
}
"""Each contract command that asks the core for something, and the one face method that
does it (the doors, LSP and command line and agents, call only those). `runfix.export`,
`runfix.outputs` and `runfix.showOutput` are the doors' own (a notebook's conversion, the
output page)."""
