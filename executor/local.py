"""A local Jupyter kernel as an `Executor`, on jupyter_client's async API.

The kernel runs on the folder's interpreter with the folder as its cwd and
talks over IPC sockets in a private 0700 directory; where ZeroMQ has no IPC
(Windows), or when the `transport` setting says so, over TCP bound to
loopback, every message signed with the connection's key.

Its stdin is /dev/null and its stdout/stderr a log file runfix keeps: the
server's own stdout is the LSP channel, and ipykernel echoes file-descriptor
output (child processes, `os.write(1, …)`, C extensions) to its fd 1 besides
sending it to the client. A watchdog process holds the kernel's process group:
if the server dies, even by SIGKILL, the kernel and every child it started die
with it (the kernel's own parent check needs the GIL, which a long C call holds).
The run loop is `jupyter.JupyterKernel`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from executor import install as installer
from executor.base import ExecutorUnavailable
from executor.channels import QuickClient
from executor.configs import LocalConfig
from executor.interpreter import (
    guarded,
    install_hint,
    ipykernel_version,
    kernel_environment,
    module_command,
)
from executor.jupyter import JupyterKernel
from executor.kernel_channels import STATEMENT_FILE, Say

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


TRANSPORTS = ("ipc", "tcp")
LOG_LIMIT = 1_000_000
"""Bytes of kernel log kept: past this at a start, the log moves to `<name>.1`."""


def log_folder() -> Path:
    """Where runfix keeps its kernels' logs (`runfix doctor` says so)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "runfix" / "logs"


def kernel_log(folder: Path) -> Path:
    """The log of the kernels of `folder`: what they wrote to stdout/stderr, ipykernel's logs."""
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:10]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", folder.name)[:40] or "root"
    return log_folder() / f"kernel-{name}-{digest}.log"


def _open_log(path: Path) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        if path.stat().st_size > LOG_LIMIT:
            path.replace(path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "ab", buffering=0)  # the kernel writes to it for its life


class _GroupWatch:
    """A tiny process that kills a process group when the server goes away.

    It reads a pipe only the server holds; at EOF (the server exited or was
    killed) it kills the group. Stopped normally, it is killed first and the
    group is left to jupyter_client (which kills it too)."""

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self._proc = subprocess.Popen(
            ["/bin/sh", "-c", f"read _ignored; kill -s KILL -- -{int(pgid)} 2>/dev/null"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()
        if self._proc.stdin is not None:
            self._proc.stdin.close()

    @classmethod
    def start(cls, km: AsyncKernelManager) -> _GroupWatch | None:
        pgid = getattr(km.provisioner, "pgid", None)
        if os.name == "nt" or not isinstance(pgid, int) or pgid <= 1 or pgid == os.getpgid(0):
            return None  # no group of its own to watch
        try:
            return cls(pgid)
        except OSError as exc:
            log.warning("no watchdog for the kernel's processes: %s", exc)
            return None


class LocalKernel(JupyterKernel[LocalConfig]):
    """A kernel process of the folder's interpreter on this machine, watched as a group."""

    def __init__(
        self,
        folder: Path,
        config: LocalConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> None:
        if config.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {config.transport!r}")
        super().__init__(folder, config, grace=grace, startup_timeout=startup_timeout)
        self._km: AsyncKernelManager | None = None
        self._log: Any = None
        self._watch: _GroupWatch | None = None
        self.log_path = kernel_log(folder)

    @property
    def launched(self) -> bool:
        return self._km is not None

    @property
    def booting(self) -> bool:
        return self._km is not None and self._km.has_kernel

    @property
    def plain(self) -> bool:
        return self.config.spec is not None

    @property
    def label(self) -> str:
        """ "kernel", or for another language's "kernel · R" (its kernelspec's display name):
        a folder has a kernel per language, and the status line says whose state it shows."""
        spec = self.config.spec
        return "kernel" if spec is None else f"kernel · {spec.display_name or spec.name}"

    @property
    def language(self) -> str:
        return self.config.spec.language if self.config.spec is not None else "python"

    async def _launch(self) -> None:
        """Launch, and only when that fails, find out whether ipykernel is what is missing
        (checking first cost a second of every start: a Python importing ipykernel)."""
        if self.config.spec is not None:
            try:
                await self._launch_kernel()
            except (OSError, RuntimeError) as exc:
                name = self.config.spec.name
                raise ExecutorUnavailable(f"The {name} kernel did not start: {exc}") from exc
            return
        if not await asyncio.to_thread(os.path.exists, self.python):
            raise ExecutorUnavailable(f"The interpreter {self.python} does not exist.")
        try:
            await self._launch_kernel()
        except ExecutorUnavailable:
            if not await ipykernel_version(self.python):
                raise ExecutorUnavailable(
                    f"{self.python} has no ipykernel, which runfix needs to run code. "
                    f"Install it: {install_hint(self.python)}"
                ) from None
            raise

    async def _launch_kernel(self) -> None:
        began = time.perf_counter()
        self._runtime = Path(tempfile.mkdtemp(prefix="runfix-"))
        os.chmod(self._runtime, 0o700)
        other = self.config.spec
        spec = (
            KernelSpec(
                argv=module_command(self.python, "ipykernel_launcher", "-f", "{connection_file}"),
                display_name="runfix",
                language="python",
                interrupt_mode="signal",
                env={},
            )
            if other is None
            else KernelSpec(
                argv=guarded(other.argv),
                display_name=other.name,
                language=other.language,
                interrupt_mode=other.interrupt_mode,
                env=dict(other.env),
            )
        )
        # TCP: loopback only; jupyter_client gives the connection a random key, and the
        # kernel drops any message not signed with it.
        where = str(self._runtime / "kernel") if self.transport == "ipc" else "127.0.0.1"
        km = AsyncKernelManager(
            kernel_spec_manager=_OneSpec(spec),
            kernel_name="runfix",
            transport=self.transport,
            ip=where,
            connection_file=str(self._runtime / "kernel.json"),
            client_class="executor.channels.QuickClient",
        )
        self._km = km
        env = kernel_environment(self.python, hidden=self.hidden_env)
        env["RUNFIX_STATEMENT_FILE"] = str(self._runtime / STATEMENT_FILE)
        self._log = _open_log(self.log_path)
        await km.start_kernel(
            cwd=str(self.folder),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        self._watch = _GroupWatch.start(km)
        await self._connect_manager()
        self.started_in = time.perf_counter() - began
        what = self.python if other is None else f"the {other.name} kernel"
        log.info("kernel for %s ready in %.2fs (%s)", self.folder, self.started_in, what)

    @property
    def python(self) -> str:
        return self.config.python

    @property
    def hidden_env(self) -> tuple[str, ...]:
        return self.config.hidden_env

    @property
    def transport(self) -> str:
        return self.config.transport

    async def _connect_manager(self) -> None:
        assert self._km is not None
        kc = self._km.client()  # a QuickClient (its `client_class`)
        kc.start_channels()
        await self._connect(cast(QuickClient, kc))

    async def _relaunch(self) -> None:
        """Replace the kernel process (now), keeping the connection file and runtime dir."""
        assert self._km is not None
        began = time.perf_counter()
        self._disconnect()
        self._stop_watch()
        await self._km.restart_kernel(now=True)
        self._watch = _GroupWatch.start(self._km)
        await self._connect_manager()
        self.started_in = time.perf_counter() - began

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    async def _discard(self) -> None:
        self._disconnect()
        self._stop_watch()
        if self._km is not None:
            try:
                await self._km.shutdown_kernel(now=True)
            except Exception:
                log.exception("killing the kernel for %s failed", self.folder)
            self._km = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._runtime is not None:
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None

    async def _stop_gracefully(self) -> None:
        assert self._km is not None
        await self._km.shutdown_kernel(now=False)

    async def _interrupt(self) -> None:
        if self._km is not None and await self._km.is_alive():
            await self._km.interrupt_kernel()

    async def is_alive(self) -> bool:
        return self._km is not None and bool(await self._km.is_alive())

    async def _install(
        self,
        distributions: list[str],
        on_line: Say | None,
        cancel: asyncio.Event | None,
        timeout: float,
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

    def _interpreter(self) -> str:
        return self.python

    async def _command(
        self, command: list[str], on_line: Say, cancel: asyncio.Event, timeout: float
    ) -> installer.InstallResult:
        """A process of the kernel's interpreter in the folder, with the kernel's environment."""
        env = kernel_environment(self.python, hidden=self.hidden_env)
        return await installer.run_process(command, self.folder, env, on_line, cancel, timeout)

    async def diagnose(self, say: Say) -> bool:
        """ipykernel in the interpreter, where the kernel logs, and a start."""
        version = await ipykernel_version(self.python)
        if version is None:
            say("ipykernel:      MISSING — runfix cannot run code with this interpreter.")
            say(f"  fix: {install_hint(self.python)}")
            say("  or point the `python` setting at an interpreter that has it.")
            return False
        say(f"ipykernel:      {version}")
        say(f"kernel log:     {self.log_path}  (its stdout, stderr and ipykernel's own log)")
        return await self.try_start("kernel", say)
