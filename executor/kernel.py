"""A local Jupyter kernel as an `Executor`, on jupyter_client's async API.

The kernel runs on the folder's interpreter with the folder as its cwd and
talks over IPC sockets in a private 0700 directory (never TCP ports). It is
started with `JPY_PARENT_PID`, so it exits by itself if the server is killed.
The run loop is `jupyter.JupyterKernel`'s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from executor import install as installer
from executor.base import ExecutorUnavailable
from executor.interpreter import install_hint, ipykernel_version, kernel_environment
from executor.jupyter import STATEMENT_FILE, JupyterKernel

log = logging.getLogger(__name__)


class _OneSpec(KernelSpecManager):
    """Hands jupyter_client our own kernel spec instead of looking one up on disk."""

    def __init__(self, spec: KernelSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._spec = spec

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return self._spec

    def find_kernel_specs(self) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class LocalConfig:
    """What a local kernel is made of; the pool replaces the kernel when this changes."""

    python: str
    hidden_env: tuple[str, ...] = ()
    """Variables the kernel must not see (API keys)."""

    def create(self, folder: Path, *, grace: float = 3.0) -> LocalKernel:
        return LocalKernel(folder, self.python, hidden_env=self.hidden_env, grace=grace)


class LocalKernel(JupyterKernel):
    def __init__(
        self,
        folder: Path,
        python: str,
        *,
        hidden_env: Iterable[str] = (),
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(folder, grace=grace, startup_timeout=startup_timeout)
        self.config: LocalConfig = LocalConfig(python, tuple(sorted(set(hidden_env))))
        self._km: AsyncKernelManager | None = None

    @property
    def launched(self) -> bool:
        return self._km is not None

    async def _launch(self) -> None:
        began = time.perf_counter()
        if not await ipykernel_version(self.python):
            if not await asyncio.to_thread(os.path.exists, self.python):
                raise ExecutorUnavailable(f"The interpreter {self.python} does not exist.")
            raise ExecutorUnavailable(
                f"{self.python} has no ipykernel, which runfix needs to run code. "
                f"Install it: {install_hint(self.python)}"
            )
        self._runtime = Path(tempfile.mkdtemp(prefix="runfix-"))
        os.chmod(self._runtime, 0o700)
        spec = KernelSpec(
            argv=[self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name="runfix",
            language="python",
            interrupt_mode="signal",
            env={},
        )
        km = AsyncKernelManager(
            kernel_spec_manager=_OneSpec(spec),
            kernel_name="runfix",
            transport="ipc",
            ip=str(self._runtime / "kernel"),
            connection_file=str(self._runtime / "kernel.json"),
        )
        self._km = km
        env = kernel_environment(self.python, hidden=self.hidden_env)
        env["RUNFIX_STATEMENT_FILE"] = str(self._runtime / STATEMENT_FILE)
        await km.start_kernel(cwd=str(self.folder), env=env)
        await self._connect_manager()
        self.started_in = time.perf_counter() - began
        log.info("kernel for %s ready in %.2fs (%s)", self.folder, self.started_in, self.python)

    @property
    def python(self) -> str:
        return self.config.python

    @property
    def hidden_env(self) -> tuple[str, ...]:
        return self.config.hidden_env

    async def _connect_manager(self) -> None:
        assert self._km is not None
        kc = self._km.client()
        kc.start_channels()
        await self._connect(kc)

    async def _relaunch(self) -> None:
        """Replace the kernel process (now), keeping the connection file and runtime dir."""
        assert self._km is not None
        began = time.perf_counter()
        self._disconnect()
        await self._km.restart_kernel(now=True)
        await self._connect_manager()
        self.started_in = time.perf_counter() - began

    async def _discard(self) -> None:
        self._disconnect()
        if self._km is not None:
            try:
                await self._km.shutdown_kernel(now=True)
            except Exception:
                log.exception("killing the kernel for %s failed", self.folder)
            self._km = None
        if self._runtime is not None:
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None

    async def _stop_gracefully(self) -> None:
        assert self._km is not None
        await self._km.shutdown_kernel(now=False)

    async def interrupt(self) -> None:
        if self._km is not None and await self._km.is_alive():
            await self._km.interrupt_kernel()

    async def is_alive(self) -> bool:
        return self._km is not None and bool(await self._km.is_alive())

    def install_blocked(self) -> str | None:
        return None

    async def install(
        self,
        distributions: list[str],
        *,
        on_line: Callable[[str], None] | None = None,
        cancel: asyncio.Event | None = None,
        timeout: float = 600.0,
    ) -> installer.InstallResult:
        """Install into the kernel's interpreter (uv if present, else its pip)."""
        return await installer.install(
            self.python,
            distributions,
            self.folder,
            hidden_env=self.hidden_env,
            on_line=on_line,
            cancel=cancel,
            timeout=timeout,
        )
