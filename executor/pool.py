"""One executor per workspace folder, shared by every document in it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path

from executor.kernel import LocalKernel

log = logging.getLogger(__name__)


class KernelPool:
    def __init__(self, hidden_env: Iterable[str] = ()) -> None:
        self._kernels: dict[Path, LocalKernel] = {}
        self._hidden_env = tuple(hidden_env)
        self._retired: set[asyncio.Task[None]] = set()

    def get(self, folder: Path, python: str, *, grace: float = 3.0) -> LocalKernel:
        """The folder's kernel; a new one when the interpreter changed (the old one stops)."""
        kernel = self._kernels.get(folder)
        if kernel is not None and kernel.python == python:
            kernel.grace = grace
            return kernel
        if kernel is not None:
            log.info("interpreter for %s changed to %s; replacing its kernel", folder, python)
            task = asyncio.ensure_future(kernel.shutdown())
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        kernel = LocalKernel(folder, python, hidden_env=self._hidden_env, grace=grace)
        self._kernels[folder] = kernel
        return kernel

    def find(self, folder: Path) -> LocalKernel | None:
        return self._kernels.get(folder)

    def all(self) -> list[LocalKernel]:
        return list(self._kernels.values())

    async def shutdown(self) -> None:
        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), *self._retired)
