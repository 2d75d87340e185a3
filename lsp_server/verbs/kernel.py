"""The folder's kernel, controlled: what it holds, interrupting it, restarting it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.events import Variable
from executor.jupyter import Kernel
from lsp_server.editor import KERNEL_RESTARTED, Editor, Level
from lsp_server.runs import Where
from lsp_server.services.gate import Gate
from lsp_server.session import Session
from lsp_server.text.languages import PYTHON


class KernelControl:
    """What the folder's kernel holds; interrupt and restart (`Flow.variables`, …)."""

    def __init__(self, session: Session, editor: Editor, gate: Gate) -> None:
        self.session, self.editor, self.gate = session, editor, gate

    async def variables(self, where: Where) -> list[Variable]:
        """What the document's kernel holds, where its folder's code may run (none is
        started where it may not: nothing is asked)."""
        try:
            admitted = await self.gate.admit(where)
        except ExecutorUnavailable:
            return []  # (said when the document runs)
        if admitted is None:
            return []
        return await admitted.kernel.variables(admitted.where.settings.secret_extra_names)

    def _kernels(self, folder: Path | None, language: str) -> list[Kernel]:
        if folder is None:
            return self.session.kernels.all()
        kernel = self.session.kernels.find(folder, language)
        return [kernel] if kernel is not None else []

    async def interrupt(self, folder: Path | None = None, language: str = PYTHON.id) -> int:
        """Interrupt the folder's kernel of `language` (no folder: every kernel); how many."""
        kernels = self._kernels(folder, language)
        await asyncio.gather(*(k.interrupt() for k in kernels))
        return len(kernels)

    async def restart(self, folder: Path | None = None, language: str = PYTHON.id) -> int:
        """Restart the folder's kernel of `language` (no folder: every kernel); how many."""
        kernels = self._kernels(folder, language)
        await asyncio.gather(*(k.restart() for k in kernels))
        self.editor.tell_once(KERNEL_RESTARTED, Level.INFO)
        return len(kernels)
