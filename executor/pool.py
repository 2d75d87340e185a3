"""One executor per workspace folder, shared by every document in it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path

from executor.kernel import LocalKernel

log = logging.getLogger(__name__)


class KernelPool:
    def __init__(self) -> None:
        self._kernels: dict[Path, LocalKernel] = {}
        self._retired: set[asyncio.Task[None]] = set()

    def get(
        self, folder: Path, python: str, *, grace: float = 3.0, hidden_env: Iterable[str] = ()
    ) -> LocalKernel:
        """The folder's kernel; a new one when the interpreter or the hidden variables changed.

        `hidden_env` names the variables the kernel must not see (API keys).
        """
        hidden = tuple(sorted(set(hidden_env)))
        kernel = self._kernels.get(folder)
        if kernel is not None and (kernel.python, kernel.hidden_env) == (python, hidden):
            kernel.grace = grace
            return kernel
        if kernel is not None:
            log.info("kernel settings for %s changed; replacing its kernel", folder)
            task = asyncio.ensure_future(kernel.shutdown())
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        kernel = LocalKernel(folder, python, hidden_env=hidden, grace=grace)
        self._kernels[folder] = kernel
        return kernel

    def find(self, folder: Path) -> LocalKernel | None:
        return self._kernels.get(folder)

    def all(self) -> list[LocalKernel]:
        return list(self._kernels.values())

    async def shutdown(self) -> None:
        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), *self._retired)
