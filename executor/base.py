"""The `Executor` protocol: what the language server needs from a place that runs code.

Implementations: `kernel.LocalKernel` (a Jupyter kernel on this machine); the
Docker and gateway executors come later and plug in behind the same protocol.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable
from typing import Final, Protocol, TypeVar

from executor.events import RunOutcome, RunRequest, Variable

T = TypeVar("T")


class ExecutorState(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    DEAD = "dead"
    STOPPED = "stopped"


class ExecutorUnavailable(Exception):
    """The executor cannot start; the message says why and how to fix it."""


class _Cancelled(enum.Enum):
    CANCELLED = "cancelled"


CANCELLED: Final = _Cancelled.CANCELLED
"""What `or_cancelled` gives when the event came first."""


async def or_cancelled(work: Awaitable[T], cancel: asyncio.Event | None) -> T | _Cancelled:
    """Await `work`, or stop it and give `CANCELLED` as soon as `cancel` is set.

    The one way runfix waits for something a user may cancel. Cancellation of the
    caller itself is never swallowed: it cancels `work` and propagates."""
    if cancel is None:
        return await work
    if cancel.is_set():
        if asyncio.iscoroutine(work):
            work.close()
        return CANCELLED
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled() and cancel.is_set():
        return CANCELLED
    return task.result()


class Executor(Protocol):
    @property
    def state(self) -> ExecutorState: ...

    async def start(self) -> None:
        """Start (idempotent); raises `ExecutorUnavailable` with a fix when it cannot."""

    async def execute(
        self, request: RunRequest, *, cancel: asyncio.Event | None = None
    ) -> RunOutcome:
        """Run code; concurrent calls queue in order. Never raises for what the code did."""

    async def interrupt(self) -> None: ...

    async def restart(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def variables(self) -> list[Variable]: ...
