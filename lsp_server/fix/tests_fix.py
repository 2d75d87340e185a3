"""Fixing what a failing test of the project found: the fix loop (`fixing.Fixer`) with the
project's tests as its check.

The target is the function of the project's own module the failure came from — the
innermost frame outside the tests, else the function the failing assert called — and never
a test file. A candidate is tried without touching the file: pytest imports that module
from the candidate's text (`testing.run_pytest`'s `sources`). The failing tests must pass
(FAIL_TO_PASS), then every test that passed before must still pass (PASS_TO_PASS): one
that breaks a passing test goes back to the model with what it broke, as a fix that breaks
a dependent cell does. What the model is shown of the failure is pytest's own: the
assertion with the values it compared, and the values the innermost frame held."""

from __future__ import annotations

import ast
import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executor.events import Error, Frame, Guard, RunOutcome, RunStatus, Variable
from executor.jupyter import Kernel
from executor.safety import Finding
from executor.testing import TestResult, TestRun
from executor.text import split_lines
from lsp_server.fix.fixcheck import Check, Dependent, Verdict
from lsp_server.fix.fixing import (
    Fixer,
    FixResult,
    Target,
    enclosing,
    module_target,
    user_module,
)
from lsp_server.fix.kept_tests import KeptTests
from lsp_server.fix.ports import retry_temperature
from lsp_server.folder_files import read_regular_file
from lsp_server.model.client import ModelClient
from lsp_server.record.store import RecordedRun
from lsp_server.settings import Settings
from lsp_server.testing import Failure, failures, is_test_file
from lsp_server.text.cells import code_of

SOURCE_LIMIT = 1_000_000


def _read(path: Path) -> list[str] | None:
    try:
        data, _ = read_regular_file(path, SOURCE_LIMIT)
        return split_lines(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _called(
    lines: Sequence[str], line: int, detail: Sequence[str], body: Sequence[str] = ()
) -> list[str]:
    """The names the failing line calls (`mean` in `assert mean(xs) == 3`, `stats.mean`),
    those pytest's detail says it called (`+  where 2.0 = mean([2, 4])`), then those the
    rest of the test's `body` calls (the call under `with pytest.raises(…):`), in order."""
    names: list[str] = []
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    wheres = [d.split("=", 1)[-1] for d in detail if "where" in d]
    for source in [text, *wheres, *(b.strip() for b in body)]:
        try:
            tree = ast.parse(source.strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name not in names and name.replace(".", "").isidentifier():
                    names.append(name)
    return names


def _module_file(folder: Path, module: str) -> Path | None:
    """The folder's file of a module name (flat or `src/` layout; a package's `__init__`)."""
    relative = Path(*module.split("."))
    for base in (folder, folder / "src"):
        for path in (base / relative.with_suffix(".py"), base / relative / "__init__.py"):
            if path.is_file():
                return path
    return None


def _imports(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """What a test file's names are: `{name: (module, attribute or None)}`."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0],
                    None,
                )
    return found


def _definition(path: Path, name: str) -> Target | None:
    """The top-level function or class `name` of a module file, as a fix's target."""
    lines = _read(path)
    if lines is None:
        return None
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return None
    for node in tree.body:
        defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, defined) and node.name == name:
            return module_target(path, node.lineno - 1)
    return None


def called_target(failure: Failure, folder: Path) -> Target | None:
    """The function of the project's modules the failing line called (through the test
    file's imports), the first one found."""
    test_lines = _read(failure.at.path)
    if test_lines is None:
        return None
    try:
        names = _imports(ast.parse("".join(test_lines)))
    except SyntaxError:
        return None
    first, last = enclosing(test_lines, 0, len(test_lines) - 1, failure.at.line - 1)
    body = test_lines[first : last + 1]
    for called in _called(test_lines, failure.at.line, failure.detail, body):
        head, _, rest = called.partition(".")
        if head not in names:
            continue
        module, attribute = names[head]
        candidates = []
        if attribute is None:  # import pkg.stats as s; s.mean(…)
            parts = rest.split(".") if rest else []
            candidates.append((".".join([module, *parts[:-1]]), parts[-1] if parts else ""))
        else:  # from pkg.stats import mean; or from pkg import stats; stats.mean(…)
            candidates.append((module, attribute) if not rest else (f"{module}.{attribute}", rest))
        for module_name, name in candidates:
            path = _module_file(folder, module_name)
            if path is None or not name or is_test_file(path):
                continue
            if user_module(str(path.resolve()), folder) is None:
                continue
            target = _definition(path.resolve(), name.split(".")[0])
            if target is not None:
                return target
    return None


def test_target(failure: Failure, folder: Path) -> Target | None:
    """Where the fix of a failing test goes: the frame outside the tests that raised, else
    the function the failing line called; None when the failure is the test's own."""
    raised = failure.raised
    if raised is not None and not is_test_file(raised.path):
        module = user_module(str(raised.path), folder)
        if module is not None:
            return module_target(module, raised.line - 1)
    return called_target(failure, folder)


def failure_text(failure: Failure) -> str:
    """What the model is told of a failing test: pytest's text (the assertion and its
    compared values) and the values the innermost frame held."""
    test = failure.test
    lines = []
    for frame in test.frames[-2:]:
        if frame.locals:
            held = ", ".join(f"{k} = {v}" for k, v in frame.locals.items())
            lines.append(f"Values in {frame.name} (line {frame.line}): {held}")
    # pytest's explanation of the compared values, then the exception (last, as Python says it)
    lines += [f"{test.id} {test.outcome}:", *failure.detail, failure.message]
    return "\n".join(lines)


def test_code(failure: Failure) -> tuple[list[str], int, int, str] | None:
    """The failing test's file lines, its function's lines (0-based) and code."""
    lines = _read(failure.at.path)
    if lines is None:
        return None
    line = min(max(failure.test.line, 1), len(lines)) - 1
    first, last = enclosing(lines, 0, len(lines) - 1, max(failure.at.line - 1, line))
    return lines, first, last, code_of(lines, first, last)


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
    lines = _read(Path(test.path)) or []
    if not 0 < test.line <= len(lines):
        return Dependent(test.line - 1, test.line - 1, test.id, "pass")
    first, last = enclosing(lines, 0, len(lines) - 1, test.line - 1)
    return Dependent(first, last, code_of(lines, first, last), "pass")


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
        lines = list(target.lines)
        rows = candidate.splitlines(keepends=True)
        if rows and not rows[-1].endswith("\n"):
            rows[-1] += "\n"
        lines[target.first : target.last + 1] = rows
        text = "".join(lines)
        try:
            compile(text, str(target.path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            error = Error("SyntaxError", str(exc.msg), (), f"SyntaxError: {exc}")
            return RunOutcome(RunStatus.ERROR, (error,), 0.0)
        self.sources = {str(target.path): text}
        self._tried = (target, candidate)
        return RunOutcome(RunStatus.OK, (), 0.0)

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

    async def run(self, code: str, at: int) -> RunOutcome:
        """The failing tests, with the candidate in place."""
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


Apply = Callable[[Target, str, str], Awaitable[bool]]
"""Puts a fix into its module file (`code` over the target's lines; `label` says what it
is): the command line writes it, an editor applies it as an edit. False: not applied."""
Say = Callable[[str, bool], None]
"""A line for the user: `path:line:1: note: …`; True: progress (the terminal's stderr)."""


def _shown(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix() if path.is_relative_to(folder) else str(path)


@dataclass
class TestFixer:
    """Fixes a test run's failures: each failing test's module function by the fix loop
    with the tests as its check, applied only when the failing tests pass and every test
    that passed still does (the command line and the editor alike)."""

    kernel: Kernel
    model: ModelClient
    settings: Settings
    folder: Path
    cancel: asyncio.Event
    timeout: float
    allowed: tuple[str, ...] = ()
    """What the user allowed model-written code to do in the folder for good (the guard)."""
    record: Callable[[RecordedRun], object] | None = None
    """Where the candidates' runs go (`TestFixPorts.record`)."""
    results: list[FixResult] = field(default_factory=list)
    """Each target's result, in order."""
    ids: list[list[str]] = field(default_factory=list)
    """The failing tests each target's fix was for, in the same order."""
    unchecked: str | None = None
    """Why no fix can be verified (the folder's tests could not all run first)."""

    async def fix(self, run: TestRun, apply: Apply, say: Say, *, selected: bool = False) -> int:
        """How many fixes were applied. `selected`: the run was of some of the folder's tests
        (one test's quick fix, a file): the tests that must still pass are every test of the
        folder that passes now, learnt by one run of them all first — a fix checked against
        the one failing test alone could break the rest."""
        passing = run.passed
        self.unchecked = None
        if (why := self.model.config.missing()) is not None:
            say(f"runfix: note: the failing tests were not fixed: {why}", False)  # (once)
            return 0
        if selected and run.failed and not self.cancel.is_set():
            say("running the folder's tests: those that pass must still pass", True)
            whole = await self.kernel.run_tests(
                [], cancel=self.cancel, timeout=self.timeout,
                secret_names=self.settings.secret_extra_names,
            )  # fmt: skip
            if whole.problem() is None and whole.stopped is None:
                failing = {r.id for r in run.failed}
                passing = [r for r in whole.passed if r.id not in failing]
            elif not self.cancel.is_set():
                # which tests pass is not known: a fix cannot be checked against them
                why = whole.problem() or f"{whole.stopped} hung"
                self.unchecked = f"the folder's tests could not all run ({why})"
        groups: dict[tuple[Path, int], tuple[Target, list[Failure]]] = {}
        for failure in failures(run):
            target = test_target(failure, self.folder)
            if target is None or target.path is None:
                name = failure.test.id.rsplit("::", 1)[-1]
                at = f"{_shown(failure.at.path, self.folder)}:{failure.at.line}:1"
                say(f"{at}: note: {name}: no function of the project's modules to fix (test "
                    "files are not changed)", False)  # fmt: skip
                continue
            groups.setdefault((target.path, target.first), (target, []))[1].append(failure)
        applied = 0
        for target, group in groups.values():
            if self.cancel.is_set():
                break
            applied += await self._one(passing, target, group, apply, say)
        return applied

    async def _one(
        self,
        passing: list[TestResult],
        target: Target,
        group: list[Failure],
        apply: Apply,
        say: Say,
    ) -> int:
        assert target.path is not None
        test = test_code(group[0])
        if test is None:
            return 0
        lines, first, last, code = test
        where = f"{_shown(target.path, self.folder)}:{target.first + 1}:1"
        ids = [f.test.id for f in group]
        ports = TestFixPorts(
            self.kernel, self.model, ids, passing,
            lambda message: say(f"{where}: note: fixing: {message}", True),
            self.cancel, self.timeout, folder=self.folder,
            guard=Guard(allow=self.allowed, keep=self.allowed),
            secret_names=self.settings.secret_extra_names, record=self.record,
        )  # fmt: skip
        settings = self.settings
        fixer = Fixer(
            ports,
            max_attempts=settings.fix_max_attempts,
            budget=settings.context_budget,
            max_tokens=self.model.config.max_tokens,
            path=str(group[0].at.path),
            by_tests=True,
            narrow=False,  # the line to rewrite is rarely the one named (a def, an assert)
        )
        text = "\n\n".join(failure_text(f) for f in group)
        result = await fixer.fix(lines, first, last, code, text, target=target)
        self.results.append(result)
        self.ids.append(ids)
        names = ", ".join(i.rsplit("::", 1)[-1] for i in ids)
        if result.status != "fixed" or result.code is None or result.held is not None:
            why = result.held or result.message or result.status
            say(f"{where}: note: not fixed ({names}): {why}", False)
            return 0
        unchecked = self.unchecked or (
            result.check.message
            if result.check is not None and result.check.status != "checked"
            else None
        )
        if unchecked is not None:  # it passes, but whether it breaks another test is unknown
            say(f"{where}: note: not fixed ({names}): the candidate makes it pass, but it "
                f"is not verified: {unchecked}; nothing was written", False)  # fmt: skip
            return 0
        label = f"runfix: fix of {names}"
        try:
            ok, why = await apply(target, result.code, label), "the file changed meanwhile"
        except OSError as exc:
            ok, why = False, str(exc)
        if not ok:
            say(f"{where}: warning: the fix was not applied: {why}", False)
            return 0
        kept = result.check.label if result.check is not None else "no other test passed before"
        passes = "passes" if len(group) == 1 else "pass"
        say(
            f"{where}: note: fixed (attempt {result.attempts}): {names} now {passes}; {kept}", False
        )
        return 1
