"""Cancellation, done one way: every wait a user may cancel goes through here.

- `or_cancelled(work, cancel)`: await `work`, or stop it as soon as the event
  (a `$/cancelRequest`, a progress cancel) is set.
- `graceful(work, cancel)`: run `work(cancel)`; if the caller itself is
  cancelled (a client dropping a request pygls runs as a task), set `cancel`
  first so that the work ends its own way (the kernel interrupted, the model
  stream closed), give it a moment, then let the cancellation go on.
- `stop(task)`: cancel a task and wait until it has ended.

None of them swallows the caller's own cancellation.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

T = TypeVar("T")

GRACE = 10.0  # seconds a cancelled piece of work gets to end its own way


class _Cancelled(enum.Enum):
    CANCELLED = "cancelled"


CANCELLED: Final = _Cancelled.CANCELLED
"""What `or_cancelled` gives when the event came first."""


async def or_cancelled(work: Awaitable[T], cancel: asyncio.Event | None) -> T | _Cancelled:
    """Await `work`, or stop it and give `CANCELLED` as soon as `cancel` is set."""
    if cancel is None:
        return await work
    if cancel.is_set():
        if asyncio.iscoroutine(work):
            work.close()
        return CANCELLED
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            await stop(task)
    if task.cancelled() and cancel.is_set():
        return CANCELLED
    return task.result()


async def graceful(
    work: Callable[[asyncio.Event], Awaitable[T]],
    cancel: asyncio.Event | None = None,
    grace: float = GRACE,
) -> T:
    """`await work(cancel)`; a cancelled caller sets `cancel` and waits up to `grace` for
    the work to end before the cancellation propagates."""
    cancel = asyncio.Event() if cancel is None else cancel
    task = asyncio.ensure_future(work(cancel))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel.set()
        await asyncio.wait({task}, timeout=grace)
        if not task.done():
            await stop(task)
        raise


async def stop(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for it to end; its own outcome is dropped, but a
    cancellation of the caller while it waits propagates."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: not "never retrieved" in the log
