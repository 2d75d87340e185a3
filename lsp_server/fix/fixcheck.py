"""A fix checked against the cells that depend on it, before it is offered.

A candidate that runs clean is proven for its own cell only: one that renames a column,
drops rows, changes what a function returns or deletes the failing line runs clean and
breaks the cells below that used it. So, once it ran clean, a second, throwaway kernel
(same interpreter and folder, or another sandbox container; never the user's) runs the
cells above as they stand, the fixed cell, then the cells that depend on it (`dataflow`),
and their outcomes are compared with their last recorded ones: PASS_TO_PASS,
PASS_TO_FAIL, FAIL_TO_PASS (SWE-bench's names). A candidate that makes a passing
dependent fail goes back to the model with that traceback (`fixing.Fixer`).

`deletion_style` names candidates that make the error go away by removing what failed.
Plain logic: the kernel is handed in, the record's outcomes too.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from executor.events import Guard, Jail, RunOutcome, RunRequest, RunStatus
from executor.jupyter import Kernel
from lsp_server.model.context import error_text
from lsp_server.record.store import RecordedRun
from lsp_server.text.cells import code_of, is_marker
from lsp_server.text.dataflow import DocumentMap

PASS, FAIL = "pass", "fail"
_KINDS = ("PASS_TO_PASS", "FAIL_TO_PASS", "FAIL_TO_FAIL", "NEW_TO_PASS", "NEW_TO_FAIL")
NOT_RUN = "not run"
MIN_BUDGET = 2.0
"""Seconds at least, whatever the recorded times (a run's own cost is milliseconds)."""
UNKNOWN_SECONDS = 1.0
"""A cell never recorded counts as this long in the budget."""


@dataclass(frozen=True)
class Code:
    """Code to run at a document's lines (0-based first line)."""

    first: int
    code: str


@dataclass(frozen=True)
class Dependent:
    """A cell that reads what the fixed cell defines, and how its last recorded run ended."""

    first: int
    last: int
    code: str
    before: str | None
    """pass | fail | None (never recorded with this code)."""
    seconds: float | None = None
    """Its recorded wall time."""

    @property
    def name(self) -> str:
        """How a person names it: its first statement and its line (from 1)."""
        head = next((ln.strip() for ln in self.code.splitlines() if _is_code(ln)), "")
        if len(head) > 40:
            head = head[:39] + "…"
        return f"`{head}` at line {self.first + 1}" if head else f"line {self.first + 1}"


@dataclass(frozen=True)
class Verdict:
    dependent: Dependent
    after: str
    """pass | fail | not run."""
    error: str = ""
    """What it raised, in one line."""
    text: str = ""
    """What it raised, traceback included (for the model)."""

    @property
    def kind(self) -> str:
        """PASS_TO_PASS, PASS_TO_FAIL, FAIL_TO_PASS, FAIL_TO_FAIL; NEW_… when never recorded."""
        before = (self.dependent.before or "new").upper()
        return f"{before}_TO_{self.after.upper().replace(' ', '_')}"


@dataclass
class Check:
    """What checking one candidate against its dependents came to."""

    status: str
    """checked | over budget | not checked (why in `message`) | cancelled."""
    verdicts: list[Verdict] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0
    """Wall time of the check, its kernel's start included."""
    start: float = 0.0
    """Of which its kernel's start."""
    unit: str = "dependent cell"
    """What was run again to check it (the project's tests: "passing test")."""

    @property
    def regressions(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kind == "PASS_TO_FAIL"]

    @property
    def label(self) -> str:
        """What the check says in a code action's title or a message."""
        if self.status != "checked":
            return f"not checked against dependents: {self.message}"
        broken = self.regressions
        if broken:
            named = "; ".join(f"{v.dependent.name}: {v.error}" for v in broken[:2])
            more = f" (and {len(broken) - 2} more)" if len(broken) > 2 else ""
            return f"breaks {named}{more}"
        if not self.verdicts:
            return f"verified: no {self.unit.removeprefix('dependent ')} depends on it"
        count = {kind: sum(1 for v in self.verdicts if v.kind == kind) for kind in _KINDS}
        parts = []
        if kept := count["PASS_TO_PASS"]:
            parts.append(f"{kept} {self.unit}{' still passes' if kept == 1 else 's still pass'}")
        if fixed := count["FAIL_TO_PASS"]:
            parts.append(f"{fixed} now pass{'es' if fixed == 1 else ''}")
        if still := count["FAIL_TO_FAIL"]:
            parts.append(f"{still} still fail{'s' if still == 1 else ''}, as before")
        if fresh := count["NEW_TO_PASS"]:
            parts.append(
                f"{fresh} {self.unit}{'' if fresh == 1 else 's'} that had never run "
                f"pass{'es' if fresh == 1 else ''} with it"
            )
        parts += [
            f"{v.dependent.name} fails after the fix ({v.error}); it had not run"
            for v in self.verdicts
            if v.kind == "NEW_TO_FAIL"
        ][:2]
        # "verified" only where a dependent had run before and every one that had still does
        ran_before = any(v.dependent.before is not None for v in self.verdicts)
        return ("verified: " if ran_before else "run with it (none had run before): ") + ", ".join(
            parts
        )

    def for_model(self) -> str:
        """The regressions, as the next request tells the model."""
        said = [
            f"It ran clean, but broke {v.dependent.name}, which passed before and "
            f"{'reads what' if self.unit == 'dependent cell' else 'calls what'} "
            f"this code defines:\n{textwrap.indent(v.dependent.code.rstrip(), '    ')}\n"
            f"{v.text.rstrip()}"
            for v in self.regressions
        ]
        return "\n\n".join(said)


def budget_for(
    pieces: Sequence[float | None], setting: float | None, minimum: float = MIN_BUDGET
) -> float:
    """Seconds the check may take once its kernel started: the setting, else twice the
    recorded time of the cells it runs (a cell never recorded: `UNKNOWN_SECONDS`)."""
    if setting is not None:
        return setting
    total = sum(UNKNOWN_SECONDS if s is None else s for s in pieces)
    return max(2 * total, minimum)


async def check(
    make_kernel: Callable[[], Kernel],
    path: str,
    above: Sequence[Code],
    fixed: Code,
    dependents: Sequence[Dependent],
    budget: float,
    request: Callable[[str, str, int], RunRequest],
    cancel: asyncio.Event,
    guard: Guard | None = None,
    jailed: bool = False,
) -> Check:
    """Run `above`, `fixed` and the `dependents` in a kernel of their own, started here and
    shut down before this returns, within `budget` seconds once it started. With `jailed`,
    the fixed code (the model's) and each dependent after it run in that kernel's jail (a
    confined fork: what the candidate defined, the dependents run confined too); where it
    has none, the fixed code runs under `guard`, the runtime guard, and the dependents that
    call what it defined run under it there too."""
    began = time.perf_counter()
    if not dependents:
        return Check("checked", seconds=0.0)
    kernel = make_kernel()
    verdicts: list[Verdict] = []

    async def runs() -> Check | None:
        for piece in above:  # as they stand: one that fails does not stop the check
            await kernel.execute(request(piece.code, path, piece.first), cancel=cancel)
        first = request(fixed.code, path, fixed.first)
        ran, jail = await _fixed_run(kernel, first, guard, jailed, cancel)
        if ran.jailed is not None and ran.jailed.tried:
            why = f"in the check's jail it tried {ran.jailed.said()}"
            return _ended(began, "not checked", why)
        if cancel.is_set():
            return _ended(began, "cancelled", "cancelled")
        if ran.status != RunStatus.OK:
            why = ran.error.message if ran.error else ran.note or ran.status.value
            return _ended(
                began,
                "not checked",
                "it does not run clean in a fresh kernel after the cells above "
                f"(does it rely on the kernel's state?): {why}",
            )
        for at, dependent in enumerate(dependents):
            asked = request(dependent.code, path, dependent.first)
            if jail is not None:  # the candidate and the dependents before it, in one jail
                earlier = [(d.code, path, d.first + 1) for d in dependents[:at]]
                before = ((fixed.code, path, fixed.first + 1), *earlier)
                asked = replace(asked, jail=replace(jail, before=before, through=True))
            outcome = await kernel.execute(asked, cancel=cancel)
            if cancel.is_set():
                return _ended(began, "cancelled", "cancelled")
            verdicts.append(_verdict(dependent, outcome))
        return None

    started = 0.0
    try:
        await kernel.start()
        started = time.perf_counter() - began
        ended = await asyncio.wait_for(runs(), budget)
        if ended is not None:
            ended.start = started
            return ended
    except asyncio.TimeoutError:
        ended = _ended(began, "over budget", f"over the {budget:.1f} s budget", verdicts)
    except Exception as exc:  # the second kernel did not start (or died): said, not hidden
        ended = _ended(began, "not checked", f"the check's kernel failed: {exc}", verdicts)
    else:
        ended = None
    finally:
        _end(kernel)  # nothing in it is kept: killed, and the answer does not wait for it
    ended = ended or _ended(began, "checked", "", verdicts)
    ended.start, ended.seconds = started, time.perf_counter() - began
    return ended


_ENDING: set[asyncio.Task[None]] = set()
"""Check kernels being killed (jupyter_client waits a poll interval, 0.1 s, for the exit)."""


def _verdict(dependent: Dependent, outcome: RunOutcome) -> Verdict:
    """How a dependent did after the fix; one that tried what the check's jail refuses (the
    user's code writing its output) is not judged."""
    if outcome.jailed is not None and outcome.jailed.tried:
        said = f"not judged: in the check's jail it tried {outcome.jailed.said()}"
        return Verdict(dependent, "not run", said)
    if outcome.status == RunStatus.OK:
        return Verdict(dependent, PASS)
    failed = outcome.error
    headline = failed.message if failed else outcome.note or outcome.status.value
    text = error_text(failed.message, failed.text) if failed else headline
    return Verdict(dependent, FAIL, headline, text)


async def _fixed_run(
    kernel: Kernel, first: RunRequest, guard: Guard | None, jailed: bool, cancel: asyncio.Event
) -> tuple[RunOutcome, Jail | None]:
    """The fixed code's run in the check's kernel: in its jail (`jailed`), else — or where
    that kernel has none — under the guard. Its outcome, and the jail the dependents after it
    run in (None: in the kernel)."""
    jail = Jail.within(first.timeout) if jailed else None
    if jail is not None:
        ran = await kernel.execute(replace(first, jail=jail), cancel=cancel)
        if ran.jailed is None or ran.jailed.available:
            return ran, jail
    return await kernel.execute(replace(first, guard=guard), cancel=cancel), None


def _end(kernel: Kernel) -> None:
    async def kill() -> None:
        with contextlib.suppress(Exception):
            await kernel.kill()

    task = asyncio.ensure_future(kill())
    _ENDING.add(task)
    task.add_done_callback(_ENDING.discard)


async def ended() -> None:
    """Wait until every check's kernel is gone (a server or `runfix run` ending waits)."""
    while _ENDING:
        await asyncio.gather(*_ENDING, return_exceptions=True)


def _ended(began: float, status: str, message: str, verdicts: list[Verdict] | None = None) -> Check:
    return Check(status, verdicts or [], message, time.perf_counter() - began)


# -- what the user last saw -------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a fix's check runs: the cells above the fixed one, it, the cells that depend on
    it (with how each last ran), and the recorded times of all of them."""

    above: list[Code]
    fixed: Code
    dependents: list[Dependent]
    seconds: list[float | None]


def plan(
    lines: Sequence[str], first: int, last: int, candidate: str, recorded: Sequence[_Ran]
) -> Plan | None:
    """The check of `candidate` in place of lines first..last of `lines` (the cells that
    read what its cell defines, or defined before: `DocumentMap.dependents`), from the
    file's `recorded` runs; None: no cell depends on it (nothing to check)."""
    rows = candidate if candidate.endswith("\n") else candidate + "\n"
    fixed_lines = [*lines[:first], *rows.splitlines(keepends=True), *lines[last + 1 :]]
    before, after = DocumentMap(lines), DocumentMap(fixed_lines)
    index = after.index(first)
    was = before.flow(before.index(first)).defines

    def piece(bounds: tuple[int, int]) -> Code:
        a, b = bounds
        if is_marker(fixed_lines[a]) and a < b:
            a += 1  # the code under the marker, as a run of the cell records it
        return Code(a, code_of(fixed_lines, a, b))

    dependents = []
    for i in after.dependents(index, also=was):
        p = piece(after.bounds(i))
        status, seconds = last_outcome(recorded, p.code)
        dependents.append(Dependent(p.first, after.bounds(i)[1], p.code, status, seconds))
    if not dependents:
        return None
    above = [piece(after.bounds(i)) for i in range(index)]
    fixed = piece(after.bounds(index))
    times = [last_outcome(recorded, p.code)[1] for p in [*above, fixed]]
    return Plan(above, fixed, dependents, [*times, *(d.seconds for d in dependents)])


def worth_comparing(runs: Sequence[RecordedRun]) -> list[RecordedRun]:
    """Of a file's recorded runs (newest first), those a cell's last outcome is read from:
    the user's and agents', that ran to an end (whatever command ran them)."""
    return [
        run
        for run in runs
        if (run.origin == "user" or run.origin.startswith("agent"))
        and run.status in ("ok", "error")
    ]


class _Ran(Protocol):
    """A recorded run (`record.store.RecordedRun`), as far as the check reads it."""

    @property
    def first(self) -> int: ...
    @property
    def last(self) -> int: ...
    @property
    def code(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def duration(self) -> float: ...
    @property
    def error_line(self) -> int | None: ...


def last_outcome(runs: Sequence[_Ran], code: str) -> tuple[str | None, float | None]:
    """How `code` (a cell's lines) last ran, from recorded runs newest first, whatever
    command ran it: a run of the cell, a selection holding it (its marker too), the file,
    the cells above or its dependents. (pass | fail | None when no run reached it, its
    recorded wall time.) In a run that failed, a cell before the failing line passed, one
    after it did not run there, and the one holding it (or a run whose error was raised
    outside its own lines: in a function elsewhere) failed."""
    want = [line.rstrip() for line in code.rstrip("\n").split("\n")]
    while want and not want[0].strip():
        want.pop(0)
    if not want:
        return None, None
    for run in runs:
        ran = [line.rstrip() for line in run.code.rstrip("\n").split("\n")]
        at = _find(ran, want)
        if at is None:
            continue
        first = run.first + at
        last = first + len(want) - 1
        if run.status == "ok":
            return PASS, run.duration
        error = run.error_line
        if error is not None and run.first <= error < first:
            continue  # it failed before reaching these lines: they did not run in it
        if error is not None and last < error <= run.last:
            return PASS, run.duration
        return FAIL, run.duration
    return None, None


def _find(lines: Sequence[str], want: Sequence[str]) -> int | None:
    n = len(want)
    for i in range(len(lines) - n + 1):
        if lines[i] == want[0] and list(lines[i : i + n]) == list(want):
            return i
    return None


# -- deletion-style candidates ---------------------------------------------------------------


def deletion_style(original: str, candidate: str) -> str | None:
    """How `candidate` makes the error go away by removing what failed, if it does: it only
    deletes statements, silences them (`try/except: pass`), or returns early."""
    try:
        before, after = ast.parse(original), ast.parse(candidate)
    except SyntaxError:
        return None
    old, new = _leaves(before), _leaves(after)
    if len(new) < len(old) and _subsequence(new, old):
        return "only deletes the failing code"
    if _silencers(after) > _silencers(before):
        return "silences the error (try/except: pass)"
    if _early_returns(after) > _early_returns(before):
        return "returns early"
    return None


def _leaves(tree: ast.AST) -> list[str]:
    """The simple statements (no body of their own), in order, as their ASTs."""
    compound: tuple[type[ast.stmt], ...] = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    compound += (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
    compound += (ast.Match,)
    return [
        ast.dump(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
        and not isinstance(node, (*compound, ast.Pass))
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
    ]


def _subsequence(short: list[str], long: list[str]) -> bool:
    rest = iter(long)
    return all(any(item == other for other in rest) for item in short)


def _silencers(tree: ast.AST) -> int:
    """Exception handlers that do nothing."""
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.ExceptHandler)
        and all(
            isinstance(s, (ast.Pass, ast.Continue))
            or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            for s in node.body
        )
    )


def _early_returns(tree: ast.AST) -> int:
    """`return` (of nothing or `None`) under an `if`: a way out before the work. (A
    constant such as `return 0` for an empty list is an answer, often the fix itself.)"""
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        for s in node.body
        if isinstance(s, ast.Return)
        and (s.value is None or (isinstance(s.value, ast.Constant) and s.value.value is None))
    )


# -- fixed means the failing code still runs --------------------------------------------------


def still_runs(original: str, line: int, candidate: str, ename: str | None = None) -> str | None:
    """Why `candidate` does not keep the statement of `original` that raised at `line`
    (1-based in `original`), else None: the statement — or one of its kind doing the same
    job (the same names assigned, the same function called, a return in the same function)
    — must still be there, and not under a handler that catches its error (`ename`, where
    known; else any) and does not raise again, whatever the handler does instead. An argument
    changed, a name's typo fixed, a guard added around it: all fine. What cannot be judged
    (it does not parse; no statement at that line) is None."""
    try:
        before, after = ast.parse(original), ast.parse(candidate)
    except SyntaxError:
        return None
    failing = statement_at(before, line)
    if failing is None or isinstance(failing, (ast.Raise, ast.Assert)):
        return None  # the code's own raise or assert: a fix may well change it
    shown = ast.get_source_segment(original, failing) or ""
    shown = shown.strip().splitlines()[0] if shown.strip() else type(failing).__name__
    if len(shown) > 60:
        shown = shown[:59] + "…"
    parents = _parents(after)
    matches = [n for n in ast.walk(after) if same_job(failing, n, before, after)]
    if not matches:
        return f"removes the failing line (`{shown}`)"
    same = [n for n in matches if ast.dump(n) == ast.dump(failing)]
    if any(_swallowed(n, parents, ename) for n in same) or all(
        _swallowed(n, parents, ename) for n in matches
    ):  # the very statement that raised, under a handler, is silenced whatever else is there
        return f"silences the error around `{shown}` (try/except that swallows it)"
    return None


def statement_at(tree: ast.AST, line: int) -> ast.stmt | None:
    """The innermost statement covering `line`."""
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        covers = isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or 0)
        if covers and (best is None or _height(node) <= _height(best)):
            best = node  # type: ignore[assignment]
    return best


def _height(node: ast.AST) -> int:
    return (getattr(node, "end_lineno", None) or 0) - getattr(node, "lineno", 0)


def targets_of(node: ast.AST) -> set[str]:
    """The names a statement assigns (a subscript or attribute counts as its base name)."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    names: set[str] = set()
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return names


def callee_of(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _calls(node: ast.AST) -> set[str]:
    return {c for n in ast.walk(node) if isinstance(n, ast.Call) and (c := callee_of(n))}


def _similar(a: str, b: str) -> bool:
    import difflib

    return a == b or difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _function_of(tree: ast.AST, node: ast.AST) -> str | None:
    """The name of the innermost function holding `node`."""
    holders = [
        fn
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(n is node for n in ast.walk(fn))
    ]
    if not holders:
        return None
    return min(holders, key=lambda fn: (fn.end_lineno or fn.lineno) - fn.lineno).name


def same_job(failing: ast.stmt, node: ast.AST, before: ast.AST, after: ast.AST) -> bool:
    """Whether `node` (of the candidate) does what the failing statement did."""
    if not isinstance(node, ast.stmt):
        return False
    if isinstance(failing, ast.Return):
        return isinstance(node, ast.Return) and _function_of(before, failing) == _function_of(
            after, node
        )
    wanted = targets_of(failing)
    if wanted:
        return bool(wanted & targets_of(node))
    if isinstance(failing, ast.Expr) and isinstance(failing.value, ast.Call):
        callee = callee_of(failing.value)
        if isinstance(node, (ast.Expr, ast.Assign, ast.Return)):
            return any(_similar(callee, c) for c in _calls(node))
        return False
    if isinstance(failing, (ast.If, ast.While)):
        return type(node) is type(failing)
    return type(node) is type(failing) or bool(_calls(failing) & _calls(node))


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _swallowed(node: ast.AST, parents: dict[int, ast.AST], ename: str | None = None) -> bool:
    """Whether `node` sits in a `try` body with a handler that catches what it raised
    (`ename`) and does not raise again."""
    child, parent = node, parents.get(id(node))
    while parent is not None:
        in_body = isinstance(parent, ast.Try) and any(child is s for s in parent.body)
        handlers = parent.handlers if isinstance(parent, ast.Try) and in_body else []
        if any(_swallows(h, ename) for h in handlers):
            return True
        child, parent = parent, parents.get(id(parent))
    return False


def _swallows(handler: ast.ExceptHandler, ename: str | None = None) -> bool:
    """A handler that catches `ename` (None: any error it may catch) and does not raise,
    whatever it does instead: printing a constant or returning a fallback hides the error
    all the same (issue 69: `except KeyError: print("last", 0)` was called fixed)."""
    if any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
        return False
    return ename is None or _catches(handler.type, ename)


def _catches(kind: ast.expr | None, ename: str) -> bool:
    """Whether an `except` clause of `kind` catches Python's `ename` (unknown names: yes)."""
    if kind is None:
        return True
    kinds = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    raised = getattr(builtins, ename, None)
    for each in kinds:
        name = each.id if isinstance(each, ast.Name) else getattr(each, "attr", None)
        caught = getattr(builtins, name, None) if isinstance(name, str) else None
        if name == ename or caught is None or not isinstance(raised, type):
            return True  # the same name, or one that cannot be judged here
        if isinstance(caught, type) and issubclass(raised, caught):
            return True
    return False


def _is_code(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith("#")
