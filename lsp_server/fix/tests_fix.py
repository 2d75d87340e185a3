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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from executor.events import Guard
from executor.jupyter import Kernel
from executor.testing import TestResult, TestRun
from lsp_server.fix.fixing import (
    Fixer,
    FixResult,
    Target,
    enclosing,
    module_target,
    user_module,
)
from lsp_server.fix.tests_ports import Fixing, TestFixPorts, read_lines
from lsp_server.model.client import ModelClient
from lsp_server.record.store import RecordedRun
from lsp_server.settings import Settings
from lsp_server.testing import Failure, failures, is_test_file
from lsp_server.text.cells import code_of


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
    lines = read_lines(path)
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
    test_lines = read_lines(failure.at.path)
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
    lines = read_lines(failure.at.path)
    if lines is None:
        return None
    line = min(max(failure.test.line, 1), len(lines)) - 1
    first, last = enclosing(lines, 0, len(lines) - 1, max(failure.at.line - 1, line))
    return lines, first, last, code_of(lines, first, last)


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
            Fixing(say, where),
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
