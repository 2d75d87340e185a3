"""The `Executor` protocol: what the language server needs from a place that runs code.

Implementations: `kernel.LocalKernel` (a Jupyter kernel on this machine); the
Docker and gateway executors come later and plug in behind the same protocol.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Protocol

from executor.events import RunOutcome, RunRequest, Variable


class ExecutorState(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    DEAD = "dead"
    STOPPED = "stopped"


class ExecutorUnavailable(Exception):
    """The executor cannot start; the message says why and how to fix it."""


class Executor(Protocol):
    """What the language server needs of a place that runs code (`jupyter.JupyterKernel`)."""

    @property
    def state(self) -> ExecutorState: ...

    async def start(self) -> None:
        """Start (idempotent); raises `ExecutorUnavailable` with a fix when it cannot."""
        ...

    async def execute(
        self, request: RunRequest, *, cancel: asyncio.Event | None = None
    ) -> RunOutcome:
        """Run code; concurrent calls queue in order. Never raises for what the code did."""
        ...

    async def interrupt(self) -> None: ...

    async def restart(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def variables(self) -> list[Variable]: ...
