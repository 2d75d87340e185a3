"""Reads of a document's kernel for the model's context (its variables, what the frames of
its last error held): never waiting on a start or a run of its own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from executor.base import ExecutorState
from executor.events import Variable
from executor.jupyter import Kernel
from lsp_server.runs import Where
from lsp_server.session import Session
from lsp_server.text.languages import is_python

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class KernelReads:
    """What the document's kernel holds, if it is up."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def variables(self, where: Where) -> list[Variable]:
        """The kernel's variables if it is up (`_read`): R's too (listed by R)."""
        names = where.settings.secret_extra_names
        read = self._read(where, "the kernel's variables", lambda k: k.variables(names), True)
        return await read or []

    async def evidence(self, where: Where, ename: str, line: int) -> Mapping[str, Any] | None:
        """What the frames of the kernel's last error held, if it is `ename` raised on `line`
        (`Kernel.evidence`), if the kernel is up (`_read`)."""
        return await self._read(
            where,
            "what the kernel held",
            lambda kernel: kernel.evidence(ename, line, where.settings.secret_extra_names),
        )

    async def _read(
        self,
        where: Where,
        what: str,
        read: Callable[[Kernel], Awaitable[_T]],
        any_language: bool = False,
    ) -> _T | None:
        """A read of the document's kernel: None rather than waiting on a start (nor from
        another language's kernel, unless `any_language`: runfix's helper is Python)."""
        language = where.language
        if language is None or not (any_language or is_python(language)):
            return None
        kernel = self.session.kernels.find(where.folder, language.id)
        if kernel is None or kernel.state not in (ExecutorState.IDLE, ExecutorState.BUSY):
            return None
        try:
            return await asyncio.wait_for(read(kernel), 10)
        except Exception as exc:
            log.warning("could not read %s: %s", what, exc)
            return None
