"""One executor per workspace folder, shared by every document in it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from executor.configs import DockerConfig, KernelConfig, RemoteConfig
from executor.jupyter import JupyterKernel

log = logging.getLogger(__name__)


def create(
    folder: Path, config: KernelConfig, *, grace: float = 3.0, startup_timeout: float = 60.0
) -> JupyterKernel:
    """A kernel for `folder` as `config` says. Its module is imported here, on first use:
    jupyter_client, docker-py and httpx take ~0.3 s to import, and a server has answered
    `initialize` before it needs either."""
    if isinstance(config, DockerConfig):
        from executor.docker import DockerKernel

        return DockerKernel(folder, config, grace=grace, startup_timeout=startup_timeout)
    if isinstance(config, RemoteConfig):
        from executor.remote import RemoteKernel

        return RemoteKernel(folder, config, grace=grace, startup_timeout=startup_timeout)
    from executor.local import LocalKernel

    return LocalKernel(
        folder,
        config.python,
        hidden_env=config.hidden_env,
        transport=config.transport,
        grace=grace,
        startup_timeout=startup_timeout,
    )


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

    def find(self, folder: Path) -> JupyterKernel | None:
        return self._kernels.get(folder)

    def all(self) -> list[JupyterKernel]:
        return list(self._kernels.values())

    async def shutdown(self) -> None:
        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), *self._retired)
