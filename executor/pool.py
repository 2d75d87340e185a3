"""One executor per workspace folder, shared by every document in it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from executor.configs import KernelConfig
from executor.kinds import kind_of

if TYPE_CHECKING:
    from executor.jupyter import Kernel

log = logging.getLogger(__name__)


def create(
    folder: Path, config: KernelConfig, *, grace: float = 3.0, startup_timeout: float = 60.0
) -> Kernel:
    """A kernel for `folder` as `config` says (its module imported now, on first use)."""
    return kind_of(config).kernel(folder, config, grace=grace, startup_timeout=startup_timeout)


class KernelPool:
    """The folders' kernels: one per folder, replaced when its config changes."""

    def __init__(self) -> None:
        self._kernels: dict[Path, Kernel] = {}
        self._retired: set[asyncio.Task[None]] = set()

    def get(
        self,
        folder: Path,
        config: KernelConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> Kernel:
        """The folder's kernel; a new one (the old one stopped) when its config changed."""
        kernel = self._kernels.get(folder)
        if kernel is not None and kernel.config == config:
            kernel.grace, kernel.startup_timeout = grace, startup_timeout
            return kernel
        if kernel is not None:
            log.info("kernel settings for %s changed; replacing its kernel", folder)
            task = asyncio.ensure_future(kernel.retire("its settings changed"))
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        kernel = create(folder, config, grace=grace, startup_timeout=startup_timeout)
        self._kernels[folder] = kernel
        return kernel

    async def stop(self, folder: Path) -> None:
        """Stop the folder's kernel (its state goes with it); the next use makes a new one."""
        kernel = self._kernels.pop(folder, None)
        if kernel is not None:
            await kernel.shutdown()

    def find(self, folder: Path) -> Kernel | None:
        return self._kernels.get(folder)

    def all(self) -> list[Kernel]:
        return list(self._kernels.values())

    async def shutdown(self) -> None:
        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), *self._retired)
