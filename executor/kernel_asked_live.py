"""Questions while the user types (completion, hover, signature help), asked of the
kernel's live door (`executor.live.LiveDoor`) without waiting for a run: a busy kernel
without subshells is answered from the picture of its namespace its last run left."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from executor.base import ExecutorState
from executor.kernel_channels import C, KernelLifecycle
from executor.live import LiveAnswer, LiveDoor, LiveUnavailable, from_picture

log = logging.getLogger(__name__)

PICTURE_WAIT = 5.0  # seconds the kernel has to describe its namespace after a run
PICTURE_AFTER = 0.2  # seconds after a run before the picture (runs in a row take one)


class LiveKernel(KernelLifecycle[C]):
    """A kernel asked while the user types (`ask_live`)."""

    def _channels_closing(self) -> None:
        super()._channels_closing()
        self._close_live()

    def _close_live(self) -> None:
        if self._live is not None:
            self._live.close()
            self._live = None

    async def ask_live(self, op: str, data: dict[str, Any], budget: float) -> LiveAnswer | None:
        """`_kernel_live`'s answer to `op` (complete, describe, signature) within `budget`
        seconds, never starting the kernel and never waiting for a run: a busy kernel
        without subshells is answered from the picture its last run left (`fresh` False).
        None: no kernel to ask (not started, starting, gone)."""
        if self.retired is not None or self._kc is None or not self.launched or self.plain:
            return None
        if self._state in (ExecutorState.NEW, ExecutorState.STARTING, ExecutorState.DEAD):
            return None
        door = self._live
        if door is None:
            door = await self._open_live()
            if door is None:
                return None
        # The queue held only to take a picture (below) is not a run: wait those few ms.
        picturing = self._picturing is not None and not self._picturing.done()
        busy = self._state == ExecutorState.BUSY or (self._queue.locked() and not picturing)
        try:
            if door.subshell is not None or (door.own and not busy):
                return LiveAnswer(await door.ask(op, data, budget))
            if not busy:  # the run's own channels: no run may read them meanwhile
                loop = asyncio.get_running_loop()
                until = loop.time() + budget
                # (a run queued meanwhile goes first: then the picture answers, in budget)
                await asyncio.wait_for(self._queue.acquire(), budget)
                try:
                    return LiveAnswer(await door.ask(op, data, max(until - loop.time(), 0.01)))
                finally:
                    self._queue.release()
        except (LiveUnavailable, asyncio.TimeoutError) as exc:
            log.info("%s for %s: %s", op, self.folder, exc)
        return LiveAnswer(from_picture(door.picture, op, data), fresh=False)

    async def _open_live(self) -> LiveDoor | None:
        async with self._live_opening:
            if self._live is not None:
                return self._live
            kc = self._kc
            if kc is None:
                return None
            try:
                door = await LiveDoor.open(kc)
            except Exception as exc:  # no door is no completion, never a failed request
                log.warning("could not open a way to ask the %s: %s", self.where, exc)
                return None
            if self._kc is not kc:  # restarted meanwhile
                door.close()
                return None
            self._live = door
            if door.subshell is None:
                self._refresh_picture(after=0)
            return door

    def _refresh_picture(self, *, after: float = PICTURE_AFTER) -> None:
        """Ask for the namespace in brief once the kernel is idle (kernels without subshells:
        what a busy kernel's completions are answered from), `after` seconds from now."""
        door = self._live
        if door is None or door.subshell is not None:
            return

        async def refresh() -> None:
            if after:
                await asyncio.sleep(after)
                if self._live is not door or self._queue.locked():
                    return  # another run began: the picture waits for the last one
            try:
                if door.own:
                    door.picture = await door.ask("picture", {}, PICTURE_WAIT)
                else:
                    async with self._queue:
                        door.picture = await door.ask("picture", {}, PICTURE_WAIT)
            except LiveUnavailable as exc:
                log.info("no picture of the namespace: %s", exc)

        task = self._picturing = asyncio.ensure_future(refresh())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
