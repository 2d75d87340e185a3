"""A project's tests, run by pytest in the folder's own interpreter with runfix's plugin
(`executor.pytest_plugin`): each test's outcome, duration and failure as pytest saw it —
the exception text with the assertion's compared values, and the frames of the folder's own
code that raised it — read from the plugin's lines, never from pytest's text. A test that
runs longer than the run's timeout is stopped (the run is killed) and said to have hung."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from executor.events import Guard, Refusal
from executor.install import InstallResult
from executor.shipped import modules_code

PLUGIN = (Path(__file__).parent / "pytest_plugin.py").read_text(encoding="utf-8")
PROGRAM = (
    modules_code("_runfix_redact", "_runfix_guard", "_runfix_jail")
    + f"exec(compile({PLUGIN!r}, '<runfix pytest plugin>', 'exec'))\n"
)
"""What `python -c` runs: the secret rule and the runtime guard made modules, then the plugin
(`executor.pytest_plugin`), as `__main__`."""
MARKER = "\x1erunfix-test "
PYTEST_ARGS = ("-p", "no:terminal", "-p", "no:cacheprovider")
"""pytest's own output off (the plugin says what happened); no cache left in the folder."""

NO_TESTS_RAN = 5
INTERRUPTED = 2
USAGE_ERROR = 4

Command = Callable[
    [list[str], Callable[[str], None], asyncio.Event, float], Awaitable[InstallResult]
]
"""Runs a command beside the kernel (a process of its interpreter, or in its container):
its lines as they come, cancelled by the event, killed after the seconds."""


@dataclass(frozen=True)
class Frame:
    """A frame of the folder's own code a failure went through."""

    path: str
    line: int
    """From 1."""
    name: str
    locals: dict[str, str] = field(default_factory=dict)
    """The innermost frames' names and their values' reprs (cut)."""


@dataclass(frozen=True)
class TestResult:
    id: str
    """pytest's node id (`tests/test_stats.py::test_mean`)."""
    outcome: str
    """passed, failed, error (in a fixture), skipped, xfailed, xpassed, or hung."""
    duration: float
    path: str
    line: int
    """The test function's first line, from 1."""
    name: str
    error: str | None = None
    """pytest's exception text: `AssertionError: assert 2.5 == 3\\n +  where 2.5 = mean(…)`."""
    frames: tuple[Frame, ...] = ()
    """The folder's frames it went through, outermost (the test) first."""

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "error", "hung")


@dataclass
class TestRun:
    results: list[TestResult] = field(default_factory=list)
    collected: int | None = None
    exit: int | None = None
    """pytest's exit status (None: it did not end by itself)."""
    collect_errors: list[tuple[str, str]] = field(default_factory=list)
    """Files pytest could not collect (a broken conftest, an import error): path, text."""
    output: list[str] = field(default_factory=list)
    """What else it printed (pytest's usage errors, a missing pytest)."""
    stopped: str | None = None
    """Why it did not end by itself: `cancelled`, or the test that hung."""
    refused: list[Refusal] = field(default_factory=list)
    """What the runtime guard stopped a fix's candidate doing (its module's code)."""

    @property
    def failed(self) -> list[TestResult]:
        return [r for r in self.results if r.failed]

    @property
    def passed(self) -> list[TestResult]:
        return [r for r in self.results if r.outcome in ("passed", "xfailed")]

    def problem(self) -> str | None:
        """Why the run said nothing of tests (no pytest, none found, a broken conftest), in
        words; None when it ran tests."""
        said = "\n".join(line for line in self.output if line.strip())
        if "No module named pytest" in said or "No module named 'pytest'" in said:
            return "pytest is not installed in the folder's interpreter (`pip install pytest`)"
        conftest = re.search(r"while loading conftest '([^']+)'", said)
        if conftest is not None:
            last = [line for line in said.splitlines() if line.startswith("E ")][-1:] or [""]
            why = last[0].removeprefix("E").strip()
            return f"pytest could not load {conftest.group(1)}: {why}".rstrip(": ")
        if self.collect_errors:
            path, text = self.collect_errors[0]
            last = [line for line in text.splitlines() if line.strip()][-1:] or [""]
            return f"pytest could not collect {path}: {last[0].strip()}"
        if self.exit == NO_TESTS_RAN:
            return "pytest found no tests to run"
        if self.exit in (USAGE_ERROR, INTERRUPTED) and not self.results:
            tail = said.strip().splitlines()[-3:]
            return "pytest did not run: " + (" / ".join(tail) if tail else f"exit {self.exit}")
        if self.exit is None and not self.results and self.stopped is None:
            tail = said.strip().splitlines()[-3:]
            return "pytest did not start: " + (" / ".join(tail) or "no output")
        return None


def _frame(item: dict[str, Any]) -> Frame:
    names = item.get("locals") or {}
    return Frame(
        str(item.get("path", "")),
        int(item.get("line", 0)),
        str(item.get("name", "")),
        {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {},
    )


class _Reader:
    """The plugin's lines into a `TestRun`; the test under way and when it started."""

    def __init__(self, run: TestRun, on_result: Callable[[TestResult], None] | None) -> None:
        self.run, self.on_result = run, on_result
        self.current: str | None = None
        self.where: tuple[str, int] = ("", 1)
        """The file and line of the test under way."""
        self.since = time.monotonic()

    def line(self, line: str) -> None:
        at = line.find(MARKER)
        if at < 0:
            self.run.output.append(line)
            return
        try:
            event = json.loads(line[at + len(MARKER) :])
        except ValueError:
            return
        kind = event.get("event")
        if kind == "collected":
            self.run.collected = int(event.get("count", 0))
        elif kind == "collect-error":
            self.run.collect_errors.append((str(event.get("path")), str(event.get("text"))))
        elif kind == "start":
            self.current, self.since = str(event.get("id")), time.monotonic()
            self.where = (str(event.get("path")), int(event.get("line") or 1))
        elif kind == "test":
            self._test(event)
        elif kind == "end":
            self.run.exit = int(event.get("exit", 0))
        elif kind == "guard":
            self.run.refused.append(Refusal.of(event))

    def _test(self, event: dict[str, Any]) -> None:
        frames = tuple(_frame(f) for f in event.get("frames") or () if isinstance(f, dict))
        result = TestResult(
            id=str(event.get("id")),
            outcome=str(event.get("outcome")),
            duration=float(event.get("duration") or 0.0),
            path=str(event.get("path")),
            line=int(event.get("line") or 1),
            name=str(event.get("name")),
            error=event.get("error"),
            frames=frames,
        )
        # a fixture's error after the call's report: one result per test, the worse one
        self.run.results = [r for r in self.run.results if r.id != result.id or r.failed]
        if not any(r.id == result.id for r in self.run.results):
            self.run.results.append(result)
            if self.on_result is not None:
                self.on_result(result)


SOURCES = "--runfix-sources="
"""The plugin's leading argument giving module files' sources (`pytest_plugin.SOURCES`)."""
GUARD = "--runfix-guard="
SECRET_NAMES = "--runfix-secret-names="
CONFINED = "--runfix-confined="


async def run_pytest(
    command: Command,
    python: str,
    args: Sequence[str],
    *,
    on_result: Callable[[TestResult], None] | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float = 120.0,
    sources: Mapping[str, str] | None = None,
    guard: Guard | None = None,
    secret_names: Sequence[str] = (),
) -> TestRun:
    """pytest with `args` (paths, `-k EXPR`) through `command`, in the folder's interpreter
    `python`; each result as it comes (`on_result`). A test running longer than `timeout`
    seconds stops the run: it is reported as hung, the tests after it do not run. `sources`:
    module files (by path, as the interpreter sees them) imported from the text given, not
    from the file (a candidate fix, tried before it is written), its code under the runtime
    guard with `guard`'s allowances. Secrets are hidden from what it says (with
    `secret_names` too)."""
    run = TestRun()
    reader = _Reader(run, on_result)
    stop = asyncio.Event()
    hung: list[str] = []

    async def watch() -> None:
        while not stop.is_set():
            if cancel is not None and cancel.is_set():
                stop.set()
                return
            if reader.current is not None and time.monotonic() - reader.since > timeout:
                hung.append(reader.current)
                stop.set()
                return
            await asyncio.sleep(0.05)

    watcher = asyncio.ensure_future(watch())
    try:
        # the whole run bounded too: a long suite of quick tests is not one hung test
        given = [SOURCES + json.dumps(dict(sources))] if sources else []
        if guard is not None:  # the model's candidate: under the guard, in a confined run
            given += [GUARD + json.dumps(guard.said()), CONFINED + "true"]
        if secret_names:
            given.append(SECRET_NAMES + json.dumps(list(secret_names)))
        argv = [python, "-c", PROGRAM, *given, *PYTEST_ARGS, *args]
        ended = await command(argv, reader.line, stop, max(timeout * 50, 3600.0))
    finally:
        stop.set()
        await watcher
    if hung:
        run.stopped = hung[0]
        name = hung[0].rsplit("::", 1)[-1]
        path, line = reader.where
        said = f"the test ran over {timeout:g}s: stopped (the tests after it did not run)"
        run.results.append(TestResult(hung[0], "hung", timeout, path, line, name, said))
        if on_result is not None:
            on_result(run.results[-1])
    elif ended.cancelled or (cancel is not None and cancel.is_set()):
        run.stopped = "cancelled"
    return run
