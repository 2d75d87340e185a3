"""One executor per workspace folder, shared by every document in it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from pathlib import Path
from typing import Protocol

from executor.jupyter import JupyterKernel

log = logging.getLogger(__name__)


class KernelConfig(Hashable, Protocol):
    """A frozen description of a kernel (`LocalConfig`, `DockerConfig`) that can make one."""

    def create(
        self, folder: Path, *, grace: float = 3.0, startup_timeout: float = 60.0
    ) -> JupyterKernel: ...


class KernelPool:
    def __init__(self) -> None:
        self._kernels: dict[Path, JupyterKernel] = {}
        self._retired: set[asyncio.Task[None]] = set()

    def get(
        self,
        folder: Path,
        config: KernelConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> JupyterKernel:
        """The folder's kernel; a new one (the old one stopped) when its config changed."""
        kernel = self._kernels.get(folder)
        if kernel is not None and kernel.config == config:
            kernel.grace, kernel.startup_timeout = grace, startup_timeout
            return kernel
        if kernel is not None:
            log.info("kernel settings for %s changed; replacing its kernel", folder)
            task = asyncio.ensure_future(kernel.shutdown())
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        kernel = config.create(folder, grace=grace, startup_timeout=startup_timeout)
        self._kernels[folder] = kernel
        return kernel

    def find(self, folder: Path) -> JupyterKernel | None:
        return self._kernels.get(folder)

    def all(self) -> list[JupyterKernel]:
        return list(self._kernels.values())

    async def shutdown(self) -> None:
        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), *self._retired)
