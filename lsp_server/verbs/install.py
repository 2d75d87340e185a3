"""Installing distributions into the folder's kernel, then running again what failed for
want of them."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from executor.events import RunRequest
from lsp_server.contract import InstallAnswer, Range, Status
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.services.installs import Installer
from lsp_server.services.runner import Runner

INVALIDATE_CACHES = "import importlib\nimportlib.invalidate_caches()\n"


class InstallAndRerun:
    """Install, then re-run (`Flow.install`)."""

    def __init__(self, installer: Installer, runner: Runner, desk: Desk) -> None:
        self.installer, self.runner, self.desk = installer, runner, desk

    async def install(
        self,
        where: Where,
        packages: list[str],
        rerun: Range | None,
        cancel: asyncio.Event,
        ask: str | None = None,
    ) -> InstallAnswer:
        """Install distributions into the folder's kernel (`Installer`); then re-run what
        failed. With `ask` (why no data vouches for the name), only once the user says so."""
        line = rerun.start.line if rerun else None
        answer, kernel = await self.installer.install(where, packages, line, cancel, ask)
        if answer.status != Status.OK or rerun is None or kernel is None:
            return answer
        with suppress(Exception):
            await self.runner.quietly(kernel, RunRequest(INVALIDATE_CACHES, "<runfix>", 1, 30))
        ran = await self.runner.run_range(self.desk.now(where), rerun, cancel)
        return InstallAnswer(Status.OK, run=ran)
