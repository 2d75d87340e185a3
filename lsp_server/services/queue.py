"""A folder's runs, one at a time: the run lock, taken at once when free; queued, the
progress says behind what (a run waiting for `input()` can take long)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsp_server.editor import Editor
from lsp_server.runs import Where
from lsp_server.session import Session

QUEUE_REPORTS = 0.25  # seconds between looks at what a queued run waits for


class FolderQueue:
    """Each folder's runs behind one another (`Runner.queue`)."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session, self.editor = session, editor
        self._doing: dict[Path, str] = {}
        """What a folder's run in progress waits for, for the runs queued behind it."""

    def doing(self, folder: Path, why: str | None) -> None:
        """What the folder's run in progress waits for now (None: nothing), said by the
        runs queued behind it."""
        if why is None:
            self._doing.pop(folder, None)
        else:
            self._doing[folder] = why

    async def locked(self, where: Where, cancel: asyncio.Event) -> asyncio.Lock | None:
        """The folder's run lock, held; None if cancelled while waiting for it."""
        lock = self.session.run_lock(where.folder)
        if not lock.locked():  # free: taken at once, without a task to watch `cancel`
            await lock.acquire()
            return lock
        acquired = asyncio.ensure_future(lock.acquire())
        cancelled = asyncio.ensure_future(cancel.wait())
        said: str | None = None
        try:
            async with self.editor.progress(cancel) as progress:
                while not acquired.done():
                    doing = self._doing.get(where.folder, "")
                    if doing != said:
                        why = f" ({doing})" if doing else ""
                        progress.report(f"Waiting for the folder's run in progress{why}")
                        said = doing
                    await asyncio.wait({acquired, cancelled}, timeout=QUEUE_REPORTS)
                    if cancelled.done() and not acquired.done():
                        return None
        finally:
            cancelled.cancel()
            acquired.cancel()  # (a no-op once it holds the lock)
        return lock
