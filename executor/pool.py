"""One executor per workspace folder and language, shared by every document in it."""

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


PYTHON = "python"


class KernelPool:
    """The folders' kernels: one per folder and language (Python's, and another language's
    where a document of it ran), replaced when its config changes."""

    def __init__(self) -> None:
        self._kernels: dict[tuple[Path, str], Kernel] = {}
        self._retired: set[asyncio.Task[None]] = set()

    def get(
        self,
        folder: Path,
        config: KernelConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
        language: str = PYTHON,
    ) -> Kernel:
        """The folder's kernel of `language`; a new one (the old one stopped) when its config
        changed."""
        kernel = self._kernels.get((folder, language))
        if kernel is not None and kernel.config == config:
            kernel.grace, kernel.startup_timeout = grace, startup_timeout
            return kernel
        if kernel is not None:
            log.info("kernel settings for %s changed; replacing its kernel", folder)
            task = asyncio.ensure_future(kernel.retire("its settings changed"))
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        kernel = create(folder, config, grace=grace, startup_timeout=startup_timeout)
        self._kernels[(folder, language)] = kernel
        return kernel

    async def stop(self, folder: Path) -> None:
        """Stop the folder's kernels (their state goes with them); the next use makes new ones."""
        stopped = [self._kernels.pop(key) for key in list(self._kernels) if key[0] == folder]
        await asyncio.gather(*(kernel.shutdown() for kernel in stopped))

    def find(self, folder: Path, language: str = PYTHON) -> Kernel | None:
        return self._kernels.get((folder, language))

    def all(self) -> list[Kernel]:
        return list(self._kernels.values())

    async def shutdown(self) -> None:
        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), *self._retired)
