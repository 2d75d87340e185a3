"""The face: one method per command of the contract, each handing it to the verb that does
it (`lsp_server.verbs`), and what the doors (the LSP front end, agents, the command line)
ask of the state, handed to the service that keeps it (`lsp_server.services`).

Every request comes with its document's context (`runs.Where`, made once at the door by
`Flow.where`); every piece of code runs through the runner (`services.runner`). The face
talks to the editor only through `editor.Editor`, and to everything else through the
`session.Session`. Which door command meets which face method: `commands.TABLE`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from executor.events import Variable
from executor.jupyter import Kernel
from executor.testing import TestResult, TestRun
from executor.trust import Choice
from lsp_server.contract import FixAnswer, GenerateAnswer, InstallAnswer, Range, RunAnswer
from lsp_server.editor import Editor
from lsp_server.fix import fixcheck
from lsp_server.fix.tests_fix import Apply, Say
from lsp_server.outputs.results import DocumentResults
from lsp_server.outputs.store import LineChange
from lsp_server.record.store import RunRecord
from lsp_server.runs import EVERY_PIECE, Piece, RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.installs import Installer
from lsp_server.services.reads import KernelReads
from lsp_server.services.runner import Runner
from lsp_server.services.steps import PieceRun
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.languages import PYTHON
from lsp_server.verbs.cells import CellRuns
from lsp_server.verbs.fix import FixFlow, FixReport
from lsp_server.verbs.generate import Generator
from lsp_server.verbs.install import InstallAndRerun
from lsp_server.verbs.kernel import KernelControl
from lsp_server.verbs.tests import TestRuns, selection
from lsp_server.verbs.trust import TrustDecisions

log = logging.getLogger(__name__)


class Flow:
    """Runs, fixes, generations and installs for any editor: what a command asks, done."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session = session
        self.editor = editor
        self.desk = Desk(session, editor)
        """What documents show, its one writer; a document's text (`services.desk`)."""
        self.gate = Gate(session, editor, self.desk)
        """Trust before a kernel, confirmation before flagged code (`services.gate`)."""
        self.runner = Runner(session, editor, self.gate, self.desk)
        """Where every piece runs, its results kept and recorded (`services.runner`)."""
        self.reads = KernelReads(session)
        """What the kernel holds, for the model (`reads`)."""
        installer = Installer(editor, self.gate, self.desk)
        self.installs = InstallAndRerun(installer, self.runner, self.desk)
        """Installing into the folder's kernel, then re-running (`verbs.install`)."""
        self.generator = Generator(session, editor, self.gate, self.runner, self.desk, self.reads)
        """Writing a prompt's body (`verbs.generate`)."""
        self.fixes = FixFlow(
            session, editor, self.gate, self.runner, self.desk, self.reads, installer
        )
        """Run and fix, fixing a piece (`verbs.fix`)."""
        self.tests = TestRuns(session, editor, self.gate, self.desk)
        """The project's tests, their failures on their lines (`verbs.tests`)."""
        self.cells = CellRuns(editor, self.gate, self.runner, self.desk)
        """The cells around one, run (`verbs.cells`)."""
        self.kernel = KernelControl(session, editor, self.gate)
        """The folder's kernel controlled (`verbs.kernel`)."""
        self.trust = TrustDecisions(session, editor, self.gate, self.desk)
        """How a folder's code may run, as decided (`verbs.trust`)."""

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
        """Cells around the one holding `line` (`CellRuns.around`)."""
        return await self.cells.around(where, line, which, cancel)

    async def run_dependents(
        self, where: Where, line: int, cancel: asyncio.Event, *, with_above: bool = False
    ) -> RunAnswer:
        """The cells below that read what the one holding `line` defines
        (`CellRuns.dependents`)."""
        return await self.cells.dependents(where, line, cancel, with_above=with_above)

    # -- fixing and generating -----------------------------------------------------------

    async def run_and_fix(
        self,
        where: Where,
        line_range: Range | None,
        cancel: asyncio.Event,
        ran: list[PieceRun] | None = None,
    ) -> FixAnswer:
        """Run; fix the piece that fails and apply the fix (`FixFlow.run_and_fix`)."""
        return await self.fixes.run_and_fix(where, line_range, cancel, ran)

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
        """What the document's kernel holds (`KernelControl.variables`)."""
        return await self.kernel.variables(where)

    async def interrupt(self, uri: str | None = None) -> int:
        """Interrupt the kernel of the document's folder and language (none: every kernel);
        how many (`KernelControl.interrupt`)."""
        return await self.kernel.interrupt(*self._kernel_of(uri))

    async def restart(self, uri: str | None = None) -> int:
        """Restart the kernel of the document's folder and language (none: every kernel);
        how many (`KernelControl.restart`)."""
        return await self.kernel.restart(*self._kernel_of(uri))

    def _kernel_of(self, uri: str | None) -> tuple[Path | None, str]:
        """The folder and language of a document's kernel (none: every kernel)."""
        if uri is None:
            return None, PYTHON.id
        language = self.editor.language_of(uri)
        return self.editor.folder_for(uri), language.id if language else ""

    async def run_code(
        self, where: Where, piece: Piece, cancel: asyncio.Event, origin: str
    ) -> PieceRun | None:
        """Code in no open document (an agent's), in the folder's kernel behind its runs:
        nothing is kept or shown (`Runner.run_code`)."""
        return await self.runner.run_code(where, piece, cancel, origin)

    # -- trust and agents -----------------------------------------------------------------

    def decide(self, folder: Path, choice: Choice, keep: bool = True) -> None:
        """The user decided how the folder's code runs (`keep`: beyond this session)."""
        self.trust.decide(folder, choice, keep)

    def allow_agents(self, folder: Path) -> None:
        """Agents may run in `folder` without asking (trust still applies)."""
        self.gate.allow_agents(folder)

    async def agent_may_run(self, folder: Path, agent: str) -> str | None:
        """Whether `agent` may run code in the folder's kernel (asked at the editor); None:
        it may, else why not."""
        return await self.trust.agent_may_run(folder, agent)

    def agent_may_read(self, folder: Path) -> str | None:
        """Whether an agent may read the folder's kernel (None: it may, else why not)."""
        return self.gate.agent_may_read(folder)

    # -- the project's tests -------------------------------------------------------------

    async def run_tests(self, where: Where, line: int | None, cancel: asyncio.Event) -> RunAnswer:
        """The project's tests for a document's line (`TestRuns.run`)."""
        return await self.tests.run(where, selection(where, line), cancel)

    async def fix_tests(self, where: Where, line: int | None, cancel: asyncio.Event) -> FixAnswer:
        """The tests `run_tests` would run, their failures fixed (`TestRuns.fix`)."""
        return await self.tests.fix(where, selection(where, line), cancel)

    async def test_folder(
        self,
        folder: Path,
        settings: Settings,
        select: list[str],
        cancel: asyncio.Event,
        timeout: float,
        on_result: Callable[[TestResult], None],
    ) -> TestRun:
        """The folder's tests for a terminal (`TestRuns.of_folder`: `runfix test`)."""
        return await self.tests.of_folder(folder, settings, select, cancel, timeout, on_result)

    async def fix_folder_tests(
        self,
        folder: Path,
        settings: Settings,
        run: TestRun,
        selected: bool,
        cancel: asyncio.Event,
        timeout: float,
        write: Apply,
        say: Say,
    ) -> int:
        """The failures of a terminal's test run fixed (`TestRuns.fix_of_folder`)."""
        return await self.tests.fix_of_folder(
            folder, settings, run, selected, cancel, timeout, write, say
        )

    # -- install --------------------------------------------------------------------------

    async def install(
        self,
        where: Where,
        packages: list[str],
        rerun: Range | None,
        cancel: asyncio.Event,
        ask: str | None = None,
    ) -> InstallAnswer:
        """Install into the folder's kernel, then re-run (`InstallAndRerun.install`)."""
        return await self.installs.install(where, packages, rerun, cancel, ask)

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
        self.trust.trust_workspace(folders)

    async def settings_changed(self, uris: Sequence[str]) -> None:
        """The client's settings changed (`TrustDecisions.settings_changed`)."""
        await self.trust.settings_changed(uris, self.where)

    async def revoke(self, folder: Path) -> Choice | None:
        """Forget the folder's trust decision (its kernel stops); the decision left."""
        return await self.trust.revoke(folder)
