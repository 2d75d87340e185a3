"""The project's tests from the editor (`runfix.runTests`): pytest beside the folder's
kernel, admitted as a run is (the folder's trust decision), with its progress per test and
cancellable; each failure shown on the line of the test that failed (with pytest's detail
of the values it compared) and on the line of the project's module that raised, each
pointing at the other. A test run replaces what the last one showed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.testing import TestResult
from lsp_server.contract import RunAnswer, Status
from lsp_server.editor import Editor, Level
from lsp_server.gate import Gate
from lsp_server.outputs.results import Problem, Related
from lsp_server.runner import run_answer
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.testing import Failure, failures, summary

KIND = "test"
"""`Problem.kind` of what a test run shows (replaced by the next test run)."""


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
            back = (Related(at.line - 1, f"called by {name}", str(at.path)),)
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


class TestRuns:
    """Runs a folder's tests for the editor and shows what failed where."""

    def __init__(self, editor: Editor, gate: Gate, desk: Desk) -> None:
        self.editor, self.gate, self.desk = editor, gate, desk

    async def run(self, where: Where, select: list[str], cancel: asyncio.Event) -> RunAnswer:
        """pytest with `select` (node ids, files; none: the project's tests)."""
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
                    select, on_result=said, cancel=cancel, timeout=admitted.where.settings.timeout
                )
        except ExecutorUnavailable as exc:
            self.editor.tell(f"runfix: cannot run the tests: {exc}", Level.ERROR)
            return run_answer(Status.ERROR, began, str(exc))
        seconds = time.perf_counter() - began
        if run.stopped == "cancelled":
            return run_answer(Status.CANCELLED, began, summary(run, seconds))
        if (problem := run.problem()) is not None:
            self.editor.tell(f"runfix: {problem}", Level.ERROR)
            return run_answer(Status.ERROR, began, problem)
        ran = {r.id for r in run.results}
        self.desk.tested(where.folder, problems(failures(run)), lambda p: of_tests(p, ran))
        tally = summary(run, seconds)
        self.editor.tell(f"runfix: tests: {tally}", Level.ERROR if run.failed else Level.INFO)
        return run_answer(Status.ERROR if run.failed else Status.OK, began, tally)
