"""What a failing test's fix asks of the world (`TestFixPorts`, the `Fixer`'s ports for a
test): its candidate is the module's function with the tests as the check — the failing
tests must pass and the passing ones still pass, run by pytest beside the folder's kernel
with the candidate's text in place of the module's. The loop (`fixing.Fixer`) calls down to
these, never back up into the test fixer that made them (`tests_fix.TestFixer`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executor.events import Error, Frame, Guard, RunOutcome, RunStatus, Variable
from executor.jupyter import Kernel
from executor.safety import Finding
from executor.testing import TestResult
from executor.text import split_lines
from lsp_server.editor import Editor, LineEdit, Progress
from lsp_server.fix.fixcheck import Check, Dependent, Verdict
from lsp_server.fix.fixing import (
    Asking,
    Target,
    enclosing,
)
from lsp_server.fix.in_place import module_with
from lsp_server.fix.kept_tests import KeptTests
from lsp_server.fix.ports import retry_temperature
from lsp_server.folder_files import read_regular_file
from lsp_server.model.client import ModelClient, ModelError
from lsp_server.record.store import RecordedRun
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.text.cells import code_of

SOURCE_LIMIT = 1_000_000


def read_lines(path: Path) -> list[str] | None:
    try:
        data, _ = read_regular_file(path, SOURCE_LIMIT)
        return split_lines(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _said(test: TestResult) -> str:
    """A failed test as the model reads it: pytest's explanation of the compared values,
    then the exception (last, as a traceback ends)."""
    lines = (test.error or test.outcome).strip().splitlines() or [test.outcome]
    return "\n".join([f"{test.id} {test.outcome}:", *lines[1:], lines[0]])


def _outcome(failed: Sequence[TestResult], path: str) -> RunOutcome:
    """Tests that did not pass, as a run's error (the fix loop reads runs)."""
    if not failed:
        return RunOutcome(RunStatus.OK, (), 0.0)
    said = "\n\n".join(_said(t) for t in failed[::-1])  # the first failure's message last
    first = (failed[0].error or failed[0].outcome).strip().splitlines() or [failed[0].outcome]
    name, _, value = first[0].partition(": ")
    frames = tuple(Frame(f.path, f.line, f.name) for f in failed[0].frames)
    return RunOutcome(RunStatus.ERROR, (Error(name, value, frames, said),), 0.0)


def _dependent(test: TestResult) -> Dependent:
    """A test that passed, as the check names it to the model: its code, where it is."""
    lines = read_lines(Path(test.path)) or []
    if not 0 < test.line <= len(lines):
        return Dependent(test.line - 1, test.line - 1, test.id, "pass")
    first, last = enclosing(lines, 0, len(lines) - 1, test.line - 1)
    return Dependent(first, last, code_of(lines, first, last), "pass")


@dataclass(frozen=True)
class Fixing:
    """How the fix of the function at `where` (`path:line:1`) says what it does: a progress
    line of `say` (a class of its own, not a closure of the test fixer's, so the loop calls
    down into it)."""

    say: Callable[[str, bool], None]
    where: str

    def __call__(self, message: str) -> None:
        self.say(f"{self.where}: note: fixing: {message}", True)


@dataclass
class TestFixPorts:
    """The fix loop's ports (`fixing.Ports`) for a failing test: the model, the tests as the
    run and the check, nothing of the kernel's namespace."""

    kernel: Kernel
    model: ModelClient
    failing: list[str]
    """The failing tests' ids (they must pass)."""
    passing: list[TestResult]
    """The tests that passed before (they must still pass)."""
    say: Callable[[str], None]
    cancel: asyncio.Event
    timeout: float
    sources: dict[str, str] = field(default_factory=dict)
    """The candidate's module text, by path, while it is tried."""
    folder: Path | None = None
    """Where the tests are: their files are kept as they were around each run (`kept_tests`)."""
    guard: Guard = field(default_factory=Guard)
    """What the runtime guard lets the candidate's code do in the test run."""
    secret_names: Sequence[str] = ()
    fixes_modules: bool = True
    origin: str = "model"
    record: Callable[[RecordedRun], object] | None = None
    """Where each candidate's run goes (the folder's run record: `runfix history` lists the
    model's candidates, what it was asked and how the failing tests did with each)."""
    _tried: tuple[Target, str] | None = field(default=None, init=False, repr=False)

    async def ask(self, messages: list[dict[str, str]], what: str, bound: int, asked: int) -> str:
        self.say(f"{what}: asking the model")
        return await self.model.complete(
            messages,
            cancel=self.cancel,
            max_tokens=bound,
            temperature=retry_temperature(self.model.config.temperature) if asked else None,
            seed=(self.model.config.seed or 0) + asked if asked else None,
        )

    async def ask_many(self, asks: Sequence[Asking], what: str) -> list[list[str]]:
        """Not asked: a test's fix has its tests for a judge, one candidate at a time."""
        raise ModelError("a test's fix asks one candidate at a time")

    async def variables(self) -> list[Variable]:
        return []

    async def confirm(self, code: str, findings: list[Finding]) -> bool:
        return False  # a flagged candidate is not run by the tests unasked

    def report(self, message: str) -> None:
        self.say(message)

    async def evidence(self, ename: str, line: int) -> Mapping[str, Any] | None:
        return None  # the failure's values come with pytest's text (`failure_text`)

    async def redefine(self, target: Target, candidate: str) -> RunOutcome:
        """The module's text with the candidate in place, for the test runs that follow; a
        candidate that does not compile is its run's error."""
        assert target.path is not None
        path, lines = str(target.path), target.lines
        text, failed = module_with(path, lines, target.first, target.last, candidate)
        if failed is not None:
            return failed
        self.sources = {str(target.path): text}
        self._tried = (target, candidate)
        return RunOutcome(RunStatus.OK, (), 0.0)

    async def define(self, code: str, at: int) -> RunOutcome:
        """A candidate for other lines than the failure's: the tests are its run."""
        return await self.run(code, at)

    async def _tests(self, ids: Sequence[str]) -> tuple[list[TestResult], str | None]:
        """The tests `ids` with the candidate in place, and why the candidate is refused
        whatever they did (the guard stopped it, it changed a test file: put back), or why
        the run was not whole (a test hung, pytest could not collect); None: neither."""
        kept = await asyncio.to_thread(KeptTests.read, self.folder) if self.folder else None
        run = await self.kernel.run_tests(
            list(ids), cancel=self.cancel, timeout=self.timeout, sources=self.sources,
            guard=self.guard, secret_names=self.secret_names,
        )  # fmt: skip
        changed = await asyncio.to_thread(kept.changed) if kept is not None else []
        ran = {r.id for r in run.results}
        missing = [
            TestResult(i, "error", 0.0, "", 1, i, run.problem() or "it did not run")
            for i in ids
            if i not in ran
        ]
        why = None
        if run.refused:
            said = "; ".join(dict.fromkeys(r.sentence for r in run.refused))
            why = f"runfix's guard stopped the candidate's code: {said}"
        elif changed:
            why = f"the candidate changed the tests, which were put back: {'; '.join(changed)}"
        elif run.stopped not in (None, "cancelled"):
            why = f"the tests did not all run: {run.stopped} hung"
        elif (problem := run.problem()) is not None:
            why = f"the tests did not all run: {problem}"
        return [*run.results, *missing], why

    async def run(self, code: str, at: int, proof_only: bool = False) -> RunOutcome:
        """The failing tests, with the candidate in place (`proof_only` is the round's
        wish for a kernel's run; the tests' run is the same either way)."""
        if self.cancel.is_set():
            return RunOutcome(RunStatus.CANCELLED, (), 0.0)
        self.say(f"running {len(self.failing)} failing test(s) with the candidate")
        began = time.time()
        results, refused = await self._tests(self.failing)
        self._recorded(began, [r for r in results if r.failed], refused)
        if self.cancel.is_set():
            return RunOutcome(RunStatus.CANCELLED, (), 0.0)
        if refused is not None and not refused.startswith("the tests did not all run"):
            error = Error("GuardStop", refused, (), f"GuardStop: {refused}")
            return RunOutcome(RunStatus.ERROR, (error,), 0.0)
        return _outcome([r for r in results if r.failed], "")

    def _recorded(self, began: float, failed: list[TestResult], refused: str | None) -> None:
        """The candidate just tried, into the run record as the model's run on its lines."""
        if self.record is None or self._tried is None or self._tried[0].path is None:
            return
        target, candidate = self._tried
        error = refused or next((r.error or r.outcome for r in failed), None)
        self.record(
            RecordedRun(
                path=str(target.path), first=target.first,
                last=target.first + max(candidate.rstrip("\n").count("\n"), 0), code=candidate,
                origin=self.origin, status="error" if error else "ok", started=began,
                duration=time.time() - began, model=self.model.last_asked,
                error=error.strip().splitlines()[0] if error and error.strip() else None,
            )
        )  # fmt: skip

    async def verify(self, candidate: str, target: Target) -> Check | None:
        """Every test that passed before, with the candidate in place. A run that was not
        whole (a test hung) checks nothing: said, never "verified"."""
        if not self.passing:
            return None
        self.say(f"checking the {len(self.passing)} test(s) that passed")
        ran, refused = await self._tests([t.id for t in self.passing])
        if self.cancel.is_set():
            return Check("cancelled")
        if refused is not None:
            return Check("not checked", message=refused, unit="passing test")
        results = {r.id: r for r in ran}
        verdicts = []
        for test in self.passing:
            after = results.get(test.id)
            ok = after is not None and not after.failed
            dependent = _dependent(test)
            error = "" if ok or after is None else (after.error or after.outcome)
            head = error.strip().splitlines()[0] if error.strip() else ""
            verdicts.append(Verdict(dependent, "pass" if ok else "fail", head, error))
        return Check("checked", verdicts, unit="passing test")


class EditorOutlet:
    """Where a test fix for the editor says what it does (the progress; its notes kept for
    the answer), writes a fix (the editor's edit of the module) and records its candidates
    (the run record): its bound methods are what `TestFixer` is handed, so the loop calls
    down into them, never back up into the verb."""

    def __init__(self, editor: Editor, session: Session, folder: Path, settings: Settings) -> None:
        self.editor, self.session, self.folder, self.settings = editor, session, folder, settings
        self.progress: Progress | None = None
        self.notes: list[str] = []

    def say(self, line: str, progressing: bool) -> None:
        if not progressing:
            self.notes.append(line)
        elif self.progress is not None:
            self.progress.report(line.split(": note: fixing: ", 1)[-1])

    async def apply(self, target: Target, code: str, label: str) -> bool:
        assert target.path is not None
        edit = LineEdit(target.first, target.last, code)
        return await self.editor.apply_file(target.path, target.lines, edit, label, target.file)

    def record(self, ran: RecordedRun) -> None:
        self.session.recorded_all(self.folder, self.settings, [ran])
