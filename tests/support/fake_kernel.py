"""The fake kernel and model the core's traced requests run against (`tests/unit/test_trace.py`):
each run answered at once, with the signatures of the real kernel's methods
(`executor.jupyter.JupyterKernel`; a test compares them), so that what the core passes is
what a kernel takes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from executor import testing as pytest_runs
from executor.base import ExecutorState
from executor.events import (
    Error,
    Event,
    Frame,
    Jailed,
    RunOutcome,
    RunRequest,
    RunStatus,
    Stream,
    Value,
)

UNDEFINED = "undefined_name"
"""The name a run fails on, unless the code it runs defines it (a fix that lands does)."""


class FakeKernel:
    """Answers each run at once: a value, or NameError where the code uses `UNDEFINED`
    without assigning it; `tests/test_m.py::test_f` fails until a candidate of `m.py`
    returns 2."""

    candidates = 0
    """Test runs with a fix's candidate in place of its module."""

    def __init__(self, folder: Path, config: Any, **_: Any) -> None:
        self.folder, self.config = folder, config
        self.grace, self.startup_timeout = 3.0, 60.0
        self.on_state: Any = None
        self.state = ExecutorState.IDLE
        self.launched = True
        self.retired = None
        self.label = "fake"
        self.plain = False
        """A Python kernel with runfix's helper: the model's code runs in its jail first."""

    async def execute(
        self,
        request: RunRequest,
        *,
        cancel: asyncio.Event | None = None,
        asked_at: float | None = None,
        ask_input: Any = None,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
        on_late: Callable[[tuple[Event, ...]], None] | None = None,
    ) -> RunOutcome:
        outcome = self._ran(request)
        return replace(outcome, jailed=Jailed("ran")) if request.jail is not None else outcome

    def _ran(self, request: RunRequest) -> RunOutcome:
        rows = request.code.splitlines()
        if UNDEFINED in request.code and not any(r.startswith(f"{UNDEFINED} =") for r in rows):
            line = request.first_line + next(i for i, r in enumerate(rows) if UNDEFINED in r)
            frame = Frame(request.filename, line, "<module>")
            error = Error("NameError", f"name '{UNDEFINED}' is not defined", (frame,), "")
            return RunOutcome(RunStatus.ERROR, (error,), 0.001)
        return RunOutcome(RunStatus.OK, (Value({"text/plain": "3"}, None),), 0.001)

    async def variables(self, secret_names: Sequence[str] = ()) -> list[Any]:
        return []

    async def run_tests(
        self,
        args: list[str],
        *,
        on_result: Callable[[pytest_runs.TestResult], None] | None = None,
        cancel: asyncio.Event | None = None,
        timeout: float = 120.0,
        sources: Mapping[str, str] | None = None,
        guard: Any = None,
        secret_names: Sequence[str] = (),
    ) -> pytest_runs.TestRun:
        folder = self.folder
        passed = bool(sources) and "return 2" in next(iter((sources or {}).values()))
        FakeKernel.candidates += bool(sources)
        frames = (
            pytest_runs.Frame(str(folder / "tests" / "test_m.py"), 5, "test_f"),
            pytest_runs.Frame(str(folder / "m.py"), 2, "f"),
        )
        result = pytest_runs.TestResult(
            "tests/test_m.py::test_f", "passed" if passed else "failed", 0.001,
            str(folder / "tests" / "test_m.py"), 3, "test_f",
            None if passed else "AssertionError: assert 1 == 2", () if passed else frames,
        )  # fmt: skip
        return pytest_runs.TestRun(results=[result], collected=1, exit=0 if passed else 1)

    async def evidence(
        self, ename: str, line: int, secret_names: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        return None

    async def shutdown(self) -> None:
        pass

    async def retire(self, why: str) -> None:
        pass


class FakeModel:
    """Answers every request with `reply`."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        said = {"temperature": None, "seed": None, "max_tokens": 256, "missing": lambda _: None}
        self.config = type("Config", (), said)()
        self.last_usage = None
        self.last_asked = None

    def prompt_tokens(self, messages: Any) -> int:
        return 100

    async def complete(self, messages: Any, **_: Any) -> str:
        return self.reply

    async def complete_many(self, messages: Any, n: int, **_: Any) -> list[str]:
        return [self.reply] * n

    async def close(self) -> None:
        pass
