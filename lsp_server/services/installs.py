"""Installing a distribution into a folder's kernel: asked first where no data vouches for
its name, behind the folder's trust decision, with its progress."""

from __future__ import annotations

import asyncio

from executor.base import ExecutorUnavailable
from executor.jupyter import Kernel
from lsp_server.contract import InstallAnswer, Status
from lsp_server.editor import SHOWN_TEXT, Editor, Level
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate

INSTALL_ANYWAY = "Install"
NO_INSTALL = "Don't install"


class Installer:
    """Installs into the folder's kernel (the install verb, and the fix's offline one)."""

    def __init__(self, editor: Editor, gate: Gate, desk: Desk) -> None:
        self.editor, self.gate, self.desk = editor, gate, desk

    async def install(
        self,
        where: Where,
        packages: list[str],
        line: int | None,
        cancel: asyncio.Event,
        ask: str | None = None,
    ) -> tuple[InstallAnswer, Kernel | None]:
        """Install distributions into the folder's kernel (for the document's `line`); the
        answer, and the kernel where it was installed. With `ask` (why no data vouches for
        the name), only once the user says so."""
        if ask is not None:
            shown = ", ".join(packages)
            message = (
                f"runfix: install {shown}? {ask[:1].upper()}{ask[1:]}; a package of that name "
                "may be someone else's. Check its page on PyPI first."
            )
            if await self.editor.choose(message, (INSTALL_ANYWAY, NO_INSTALL)) != INSTALL_ANYWAY:
                said = f"not installed: {shown} was not confirmed"
                return InstallAnswer(Status.CANCELLED, said), None
        shown = " ".join(packages)
        try:
            admitted = await self.gate.admit(where, line)
        except ExecutorUnavailable as exc:
            self.desk.explain_unavailable(where.uri, str(exc))
            return InstallAnswer(Status.ERROR, str(exc)), None
        if admitted is None:
            return InstallAnswer(Status.CANCELLED, "not installed: the folder is not trusted"), None
        kernel = admitted.kernel

        def failed(message: str, output: str | None = None) -> tuple[InstallAnswer, None]:
            self.editor.tell(message, Level.ERROR)
            return InstallAnswer(Status.ERROR, message, output), None

        if (why := kernel.install_blocked()) is not None:
            return failed(f"runfix: cannot install {shown}. {why}")
        try:
            async with self.editor.progress(cancel) as progress:
                progress.report(f"Installing {shown}")
                result = await kernel.install(
                    packages,
                    on_line=lambda line: progress.report(
                        f"Installing {shown}: {line[-SHOWN_TEXT:]}"
                    ),
                    cancel=cancel,
                )
        except ExecutorUnavailable as exc:
            return failed(f"runfix: cannot install {shown}: {exc}")
        if result.cancelled:
            return InstallAnswer(Status.CANCELLED), None
        if not result.ok:
            tail = "\n".join(result.output.strip().splitlines()[-5:])
            return failed(f"runfix: installing {shown} failed:\n{tail}", result.output)
        self.editor.tell(f"runfix: installed {shown}.", Level.INFO)
        return InstallAnswer(Status.OK), kernel
