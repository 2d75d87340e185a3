"""The project's tests from the editor (`runfix.runTests`): pytest beside the folder's
kernel, admitted as a run is (the folder's trust decision), with its progress per test and
cancellable; each failure shown on the line of the test that failed (with pytest's detail
of the values it compared) and on the line of the project's module that raised, each
pointing at the other. A test run replaces what the tests it ran showed before; the
fixes of what failed (`runfix.fixTests`) are the editor's edits of the modules."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.testing import TestResult, TestRun
from lsp_server.contract import FixAnswer, RunAnswer, Status
from lsp_server.editor import Editor, Level
from lsp_server.fix.tests_fix import Apply, Say, TestFixer
from lsp_server.fix.tests_ports import EditorOutlet
from lsp_server.outputs.results import Problem, Related
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Admitted, Gate
from lsp_server.services.runner import run_answer
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.testing import Failure, failures, is_test_file, recorded, summary, test_at


def selection(where: Where, line: int | None) -> list[str]:
    """pytest's selection for a document's line: the test function holding `line` of a
    test file, else the test file, else (another file) none: every test of the folder."""
    path = Path(where.path)
    if not (is_test_file(path) and path.is_relative_to(where.folder)):
        return []
    relative = path.relative_to(where.folder).as_posix()
    name = test_at(where.text.lines, line) if line is not None else None
    return [f"{relative}::{name}" if name else relative]


KIND = "test"
"""`Problem.kind` of what a test run shows (replaced by the next test run)."""
CALLED_BY = "called by "
"""How a module line's problem names the test it failed under (its related information:
the test's quick fix finds the test there)."""


def problems(found: Sequence[Failure]) -> dict[Path, list[Problem]]:
    """Each failure as problems of the files it is on: the test's line and the module's
    line that raised (0-based lines; each one's text is its file's, placed by the desk)."""
    out: dict[Path, list[Problem]] = {}
    for f in found:
        name = f.test.id.rsplit("::", 1)[-1]
        text = "\n".join([f.test.id, (f.test.error or f.test.outcome).rstrip()])
        at, raised = f.at, f.raised
        related = (
            (Related(raised.line - 1, f"raised in {raised.name}", str(raised.path)),)
            if raised
            else ()
        )
        message = f"{name} {f.test.outcome}: {f.message}"
        if f.detail:
            message += "\n" + "\n".join(line.strip() for line in f.detail[:6])
        out.setdefault(at.path, []).append(
            Problem(at.line - 1, at.line - 1, message, "error", text, related=related, kind=KIND)
        )
        if raised is not None and raised.path != at.path:
            back = (Related(at.line - 1, f"{CALLED_BY}{name}", str(at.path)),)
            said = f"{f.message} (in {raised.name}, when {name} ran)"
            out.setdefault(raised.path, []).append(
                Problem(
                    raised.line - 1, raised.line - 1, said, "error", text, related=back, kind=KIND
                )
            )
    return out


def of_tests(problem: Problem, tests: set[str]) -> bool:
    """Whether a test run's problem is of one of `tests` (its text starts with the id)."""
    return problem.kind == KIND and problem.text.split("\n", 1)[0] in tests


SOURCES_LIMIT = 100_000
"""Characters of unsaved module text a test run is given (more: the files on disk)."""


class TestRuns:
    """Runs a folder's tests for the editor and shows what failed where; fixes what failed."""

    def __init__(self, session: Session, editor: Editor, gate: Gate, desk: Desk) -> None:
        self.session, self.editor, self.gate, self.desk = session, editor, gate, desk

    def _unsaved(self, folder: Path) -> dict[str, str]:
        """The folder's modules open in the editor whose text is not what their file says:
        the tests run what the editor shows (test files are pytest's to read)."""
        found: dict[str, str] = {}
        for uri in self.editor.open_documents():
            path = Path(self.editor.path_of(uri))
            now = self.editor.text(uri)
            if now is None or path.suffix != ".py" or is_test_file(path):
                continue
            if not path.resolve().is_relative_to(folder.resolve()):
                continue
            text = "".join(now.lines)
            try:
                same = path.read_text(encoding="utf-8") == text
            except (OSError, UnicodeDecodeError):
                continue
            if not same and sum(map(len, found.values())) + len(text) <= SOURCES_LIMIT:
                found[str(path)] = text
        return found

    async def _tests(
        self, where: Where, select: list[str], cancel: asyncio.Event
    ) -> tuple[Admitted, TestRun] | RunAnswer:
        """The admitted kernel and the run, with its progress; else the answer saying why
        none ran."""
        began = time.perf_counter()
        try:
            admitted = await self.gate.admit(where, None)
        except ExecutorUnavailable as exc:
            self.editor.tell(f"runfix: cannot run the tests: {exc}", Level.ERROR)
            return run_answer(Status.ERROR, began, str(exc))
        if admitted is None:
            return run_answer(Status.CANCELLED, began, "not run: the folder is not trusted")
        done: list[TestResult] = []
        try:
            async with self.editor.progress(cancel) as progress:
                progress.report("Running the tests")

                def said(result: TestResult) -> None:
                    done.append(result)
                    failed = sum(r.failed for r in done)
                    progress.report(f"{len(done)} ran, {failed} failed: {result.id}")

                run = await admitted.kernel.run_tests(
                    select, on_result=said, cancel=cancel,
                    timeout=admitted.where.settings.timeout, sources=self._unsaved(where.folder),
                    secret_names=admitted.where.settings.secret_extra_names,
                )  # fmt: skip
        except ExecutorUnavailable as exc:
            self.editor.tell(f"runfix: cannot run the tests: {exc}", Level.ERROR)
            return run_answer(Status.ERROR, began, str(exc))
        # the run record keeps each test's run (its history), in one commit
        self.session.recorded_all(where.folder, admitted.where.settings, recorded(run))
        if run.stopped == "cancelled":  # what the tests that ran found shows
            self._show(where, run)
            return run_answer(Status.CANCELLED, began, summary(run, time.perf_counter() - began))
        if (problem := run.problem()) is not None:
            self.editor.tell(f"runfix: {problem}", Level.ERROR)
            return run_answer(Status.ERROR, began, problem)
        return admitted, run

    def _show(self, where: Where, run: TestRun, fixed: Collection[str] = ()) -> None:
        """What the run found replaces what the tests it ran showed (`fixed`: those a fix
        applied since makes pass)."""
        ran = {r.id for r in run.results}
        left = [f for f in failures(run) if f.test.id not in fixed]
        self.desk.tested(where.folder, problems(left), lambda p: of_tests(p, ran))

    async def run(self, where: Where, select: list[str], cancel: asyncio.Event) -> RunAnswer:
        """pytest with `select` (node ids, files; none: the project's tests)."""
        began = time.perf_counter()
        ran = await self._tests(where, select, cancel)
        if isinstance(ran, RunAnswer):
            return ran
        _, run = ran
        self._show(where, run)
        tally = summary(run, time.perf_counter() - began)
        self.editor.tell(f"runfix: tests: {tally}", Level.ERROR if run.failed else Level.INFO)
        return run_answer(Status.ERROR if run.failed else Status.OK, began, tally)

    async def of_folder(
        self,
        folder: Path,
        settings: Settings,
        select: list[str],
        cancel: asyncio.Event,
        timeout: float,
        on_result: Callable[[TestResult], None],
    ) -> TestRun:
        """The folder's tests for a terminal (`runfix test`: its user decided, the folder
        is trusted): pytest with `select` beside the folder's kernel, each result told to
        `on_result` as it comes, every test's run recorded."""
        kernel = await self.session.kernel_for(folder, settings)
        run = await kernel.run_tests(
            select, on_result=on_result, cancel=cancel, timeout=timeout,
            secret_names=settings.secret_extra_names,
        )  # fmt: skip
        self.session.recorded_all(folder, settings, recorded(run))
        return run

    async def fix_of_folder(
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
        """Each failure of `run` fixed by the model, the tests as the check (`TestFixer`), a
        fix written by `write`; how many were."""
        kernel = await self.session.kernel_for(folder, settings)
        fixer = TestFixer(
            kernel, self.session.model_for(settings), settings, folder, cancel, timeout,
            allowed=self.session.allowances.of(folder),
            record=lambda ran: self.session.recorded_all(folder, settings, [ran]),
        )  # fmt: skip
        return await fixer.fix(run, write, say, selected=selected)

    async def fix(self, where: Where, select: list[str], cancel: asyncio.Event) -> FixAnswer:
        """The tests, then each failure's module function fixed by the model with the tests
        as the check (`tests_fix.TestFixer`), the fix applied as an edit of the module."""
        ran = await self._tests(where, select, cancel)
        if isinstance(ran, RunAnswer):
            return FixAnswer(ran.status, message=ran.message)
        admitted, run = ran
        if not run.failed:
            self._show(where, run)
            return FixAnswer(Status.OK, message=f"nothing failed: {summary(run, 0.0)}")
        settings = admitted.where.settings
        model = self.session.model_for(settings)
        outlet = EditorOutlet(self.editor, self.session, where.folder, settings)
        fixer = TestFixer(
            admitted.kernel, model, settings, where.folder, cancel, settings.timeout,
            allowed=self.session.allowances.of(where.folder), record=outlet.record,
        )  # fmt: skip
        async with self.editor.progress(cancel) as progress:
            outlet.progress = progress
            applied = await fixer.fix(run, outlet.apply, outlet.say, selected=bool(select))
        notes = outlet.notes
        fixed = {
            i
            for r, ids in zip(fixer.results, fixer.ids, strict=True)
            if r.status == "fixed"
            for i in ids
        }
        self._show(where, run, fixed if applied else ())
        last = fixer.results[-1] if fixer.results else None
        message = "; ".join(re.sub(r"^.*?: (note|warning): ", "", n) for n in notes) or None
        if cancel.is_set():
            return FixAnswer(Status.CANCELLED, message=message)
        return FixAnswer(
            Status.FIXED if applied else Status.FAILED,
            last.attempts if last is not None else 0,
            message,
            last.check.label if last is not None and last.check is not None else None,
        )
