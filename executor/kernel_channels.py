"""A Jupyter kernel's connection and lifecycle: the client it drives (`KernelClient`:
jupyter_client's, or the remote server's WebSocket), its state, one start shared by every
caller, runfix's helper loaded into it, restarts and stops. Where the kernel lives is the
subclass's (`LocalKernel`, `DockerKernel`, `RemoteKernel`), through the abstract hooks.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from executor.base import ExecutorState, ExecutorUnavailable
from executor.events import (
    RunOutcome,
    Span,
)
from executor.live import LiveDoor
from executor.shipped import modules_code

log = logging.getLogger(__name__)


HELPER_MODULES = (
    "_runfix_redact",
    "_runfix_guard",
    "_runfix_kernel",
    "_runfix_live",
    "_runfix_jail",
)
HELPER_CODE = (
    modules_code(*HELPER_MODULES)
    + "__import__('_runfix_live').register()\n"
    # The guard last: what it keeps of runfix's own modules is what they are now.
    + f"__import__('_runfix_guard').install({HELPER_MODULES!r})\n"
)

Say = Callable[[str], None]
"""Where a check says what it found, a line at a time (`runfix doctor`: print)."""

C = TypeVar("C", bound=Hashable)


class KernelClient(Protocol):
    """The calls the run loop makes of a kernel's channels: jupyter_client's
    `AsyncKernelClient` has them, and so does `kernel_socket.KernelSocket`."""

    def execute(
        self,
        code: str,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
    ) -> str: ...

    def input(self, value: str, /) -> None: ...

    async def execute_interactive(
        self,
        code: str,
        *,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
        timeout: float = 60.0,
    ) -> Any: ...

    async def wait_for_ready(self, timeout: float = 60.0) -> None: ...

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]: ...

    def iopub_waiting(self) -> dict[str, Any] | None:
        """A message waiting on IOPub, taken now; None when none is there (nothing waits
        for one: no read of IOPub may be under way)."""
        ...

    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]: ...

    async def get_stdin_msg(self, timeout: float | None = None) -> dict[str, Any]: ...

    def stop_channels(self) -> None: ...


STATEMENT_FILE = "statement"
"""In the runtime folder: the statement running now (`RUNFIX_STATEMENT_FILE` in the kernel)."""


class NotReady(ExecutorUnavailable):
    """The kernel did not answer `kernel_info` in time."""


class KernelLifecycle(ABC, Generic[C]):
    """The kernel's state, its connection and its lifecycle (start, restart, stop) over the
    hooks where it lives (the subclass's); what is asked of it and run in it sits above
    (`executor.jupyter.JupyterKernel`)."""

    where = "kernel"
    """How messages name this executor ("kernel", "container")."""
    _replaced = "the kernel was restarted and its state was lost."

    def __init__(
        self, folder: Path, config: C, *, grace: float = 3.0, startup_timeout: float = 60.0
    ) -> None:
        self.folder = folder
        self.config = config
        """What the kernel is made of: the pool replaces it when the settings change this."""
        self.grace = grace
        self.startup_timeout = startup_timeout
        self._state_now = ExecutorState.NEW
        self.on_state: Callable[[ExecutorState], None] | None = None
        """Told every change of state (the server shows it in the editor's status)."""
        self._kc: KernelClient | None = None
        self._runtime: Path | None = None
        """The kernel's private folder on this host (connection file, sockets), once launched."""
        self._queue = asyncio.Lock()  # FIFO: runs in one folder queue in order
        self._starting = asyncio.Lock()
        self._start_task: asyncio.Task[None] | None = None
        """The start under way: everyone who needs the kernel meanwhile waits for this one."""
        self._start_failed: tuple[float, BaseException] | None = None
        """When the last start failed, and why (runs asked for before then share the failure)."""
        self._restart_asked: asyncio.Future[None] | None = None
        """Set by `restart()` while a run is going: the run restarts the kernel and answers."""
        self._running = False
        self._exited = False
        self.retired: str | None = None
        """Why another kernel replaced this one (its runs answer `cancelled`, saying so)."""
        """The last run's code asked the kernel to exit: it is replaced before anything else."""
        self._interrupt_sent = False
        """An interrupt was sent during this run (else a KeyboardInterrupt is the code's own)."""
        self.started_in: float | None = None
        """Seconds the last (re)start took, for `runfix doctor` and benchmarks."""
        self._live: LiveDoor | None = None
        """Where completion and hover ask (`live`), once asked; gone with the channels."""
        self._live_opening = asyncio.Lock()
        self._picturing: asyncio.Task[None] | None = None
        """Taking the picture of the namespace a busy kernel is answered from."""
        self._background: set[asyncio.Task[Any]] = set()
        self._ran: dict[str, dict[int, str]] = {}
        """Another language's kernel: what each document's runs put on each of its lines
        (1-based), to tell its functions' source lines from another document's."""
        self._late: asyncio.TimerHandle | None = None
        """The next look for what another language's kernel published for its last run
        after the run was answered (`_late_outputs`)."""

    @property
    def state(self) -> ExecutorState:
        return self._state_now

    @property
    def label(self) -> str:
        """What the editor's status line calls it ("kernel", "docker", "remote · host")."""
        return str(getattr(self.config, "KIND", "kernel"))  # (each config names its kind)

    @property
    def _channels(self) -> KernelClient:
        """The connected client (a run holds the queue, so it stays while the run reads it)."""
        if self._kc is None:
            raise ExecutorUnavailable(f"The {self.where} is not connected.")
        return self._kc

    @property
    def _state(self) -> ExecutorState:
        return self._state_now

    @_state.setter
    def _state(self, state: ExecutorState) -> None:
        changed = state != self._state_now
        self._state_now = state
        if changed and self.on_state is not None:
            try:
                self.on_state(state)
            except Exception:
                log.exception("the state listener failed")

    # -- hooks -------------------------------------------------------------------------

    @property
    @abstractmethod
    def launched(self) -> bool:
        """Whether a kernel process (or container) exists, alive or not."""

    @property
    def booting(self) -> bool:
        """Whether its process runs, answering or not yet (a start got that far)."""
        return self.launched

    @property
    def plain(self) -> bool:
        """Another language's kernel: code goes to it as it is, without runfix's helper (which
        is Python), and what it shows lands on the piece that ran (`foreign.placed`); no live
        answers, no variables, no installs."""
        return False

    @property
    def language(self) -> str:
        """The language its kernelspec says it runs."""
        return "python"

    @abstractmethod
    async def _launch(self) -> None:
        """Start the kernel and connect (`_connect`); raise `ExecutorUnavailable` if it cannot."""

    @abstractmethod
    async def _relaunch(self) -> None:
        """Replace the kernel with a fresh one, and connect to it."""

    @abstractmethod
    async def _discard(self) -> None:
        """Kill the kernel (if any) and free what it held. Never raises."""

    @abstractmethod
    async def _stop_gracefully(self) -> None:
        """Ask the kernel to exit (the caller bounds the wait, then discards)."""

    @abstractmethod
    async def _interrupt(self) -> None:
        """Send the kernel SIGINT (or what stands for it where it lives)."""

    async def interrupt(self) -> None:
        """Interrupt what runs now (`runfix.interrupt`): the run ends `cancelled`."""
        self._interrupt_sent = True
        await self._interrupt()

    @abstractmethod
    async def is_alive(self) -> bool:
        """Whether the kernel process (or the server's kernel) is still there."""

    @property
    def statement_file(self) -> Path | None:
        """Where the kernel keeps the statement it is running (host path), while it runs."""
        return self._runtime / STATEMENT_FILE if self._runtime is not None else None

    def _last_statement(self) -> Span | None:
        """The statement a dead kernel was running, from the file that outlives it."""
        if self.statement_file is None:
            return None
        try:
            first, last = struct.unpack("<qq", self.statement_file.read_bytes()[:16])
        except (OSError, struct.error):
            return None
        return Span(first, last) if first > 0 else None

    async def _death_cause(self) -> str | None:
        """Why the kernel died, when it can be told (read before it is relaunched)."""
        return None

    async def _after_run(self, outcome: RunOutcome) -> RunOutcome:
        """A chance to clean up after a run (the queue is still held)."""
        return outcome

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, *, asked_at: float | None = None) -> None:
        """Start the kernel if it is not running; every caller meanwhile shares one start.

        A caller that asked (`asked_at`, loop time) before the last start failed gets that
        failure at once instead of waiting through a second start of the same kind."""
        if self.launched and self._start_task is None:
            return
        failed = self._start_failed
        if failed is not None and asked_at is not None and asked_at < failed[0]:
            raise failed[1]
        if self._start_task is None:
            self._start_task = asyncio.ensure_future(self._start_once())
        task = self._start_task
        await asyncio.shield(task)  # one caller giving up does not stop the start for the rest

    async def _start_once(self) -> None:
        try:
            async with self._starting:
                if not self.launched:
                    await asyncio.wait_for(self._launch_fresh(), self.startup_timeout)
        except asyncio.TimeoutError:
            error = ExecutorUnavailable(
                f"The {self.where} did not start within {self.startup_timeout:g}s "
                "(the `kernelStartTimeout` setting)."
            )
            self._start_failed = (asyncio.get_running_loop().time(), error)
            raise error from None
        except BaseException as exc:
            self._start_failed = (asyncio.get_running_loop().time(), exc)
            raise
        else:
            self._start_failed = None
        finally:
            self._start_task = None

    async def _launch_fresh(self) -> None:
        self._state = ExecutorState.STARTING
        try:
            await self._launch()
        except BaseException:
            self._state = ExecutorState.DEAD
            await self._discard()
            raise
        self._state = ExecutorState.IDLE

    async def _connect(self, kc: KernelClient, ready_within: float | None = None) -> None:
        """Take a started client: wait for the kernel (`ready_within` seconds, else the start
        timeout), then load runfix's helper into it."""
        self._disconnect()
        try:
            await kc.wait_for_ready(timeout=ready_within or self.startup_timeout)
        except RuntimeError as exc:
            kc.stop_channels()
            raise NotReady(f"The kernel did not start: {exc}") from exc
        self._kc = kc
        if not self.plain:
            await self._load_helper(kc)

    async def _load_helper(self, kc: KernelClient) -> None:
        """runfix's helper into the kernel, within the start's timeout (a busy machine's
        slow kernel is waited for); whatever goes wrong is one sentence, never a traceback."""
        try:
            reply = await kc.execute_interactive(
                HELPER_CODE,
                silent=True,
                store_history=False,
                allow_stdin=False,
                timeout=self.startup_timeout,
            )
        except TimeoutError:
            raise ExecutorUnavailable(
                f"The {self.where} started but did not take runfix's helper within "
                f"{self.startup_timeout:g}s (the `kernelStartTimeout` setting)."
            ) from None
        except Exception as exc:  # (the channels failed under it: the kernel went)
            raise ExecutorUnavailable(
                f"The {self.where} started but runfix could not set it up: "
                f"{str(exc) or type(exc).__name__}"
            ) from exc
        content = reply["content"]
        if content["status"] != "ok":
            said = f"{content.get('ename', 'error')}: {content.get('evalue', '')}".rstrip(": ")
            raise ExecutorUnavailable(f"runfix could not set up the {self.where}: {said}")

    def _disconnect(self) -> None:
        self._channels_closing()
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None

    def _channels_closing(self) -> None:
        """The channels close (a restart, a stop): what the layers above read from them
        stops (`LiveKernel`, `RunningKernel`)."""

    async def retire(self, why: str) -> None:
        """Stop for good because another kernel replaces this one (`why`): a run under way
        is answered `cancelled`, saying so."""
        self.retired = why
        await self.shutdown()

    async def shutdown(self) -> None:
        # Another language's kernel has nothing of runfix's to finish; bash_kernel takes ~3 s
        # to exit when asked right after a run (its shell's pty), longer than an editor
        # waits for the server's exit (eglot: 1.5 s).
        grace = 0.5 if self.plain else 5.0
        async with self._starting:
            if self._kc is not None and self.launched:
                try:
                    await asyncio.wait_for(self._stop_gracefully(), grace)
                except (asyncio.TimeoutError, Exception):
                    # Expected of another language's kernel (its grace is short on purpose):
                    # nothing is lost, so nothing to warn a user of.
                    log.log(
                        logging.DEBUG if self.plain else logging.WARNING,
                        "%s for %s did not stop in time; killing it",
                        self.where,
                        self.folder,
                    )
            await self._discard()
            self._state = ExecutorState.STOPPED

    async def kill(self) -> None:
        """Stop at once, without asking the kernel to shut down first: for a throwaway
        kernel (a fix's check), whose state nobody keeps."""
        async with self._starting:
            await self._discard()
            self._state = ExecutorState.STOPPED

    async def restart(self) -> None:
        """Replace the kernel. During a run, the run does it and answers `cancelled`."""
        if self._running:
            if self._restart_asked is None or self._restart_asked.done():
                self._restart_asked = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._restart_asked)
            return
        async with self._starting:
            await self._restart()

    async def _restart_for_caller(self) -> None:
        """Do the restart `restart()` asked for during a run, and tell it how that went."""
        asked, self._restart_asked = self._restart_asked, None
        if asked is None or asked.done():
            return
        try:
            await self._restart_locked()
        except BaseException as exc:
            asked.set_exception(exc)
            raise
        asked.set_result(None)

    async def _restart(self) -> None:
        if not self.launched:
            await self._launch_fresh()
            return
        self._state = ExecutorState.STARTING
        try:
            await self._relaunch()
        except BaseException:
            self._state = ExecutorState.DEAD
            raise
        self._state = ExecutorState.IDLE

    async def _restart_locked(self) -> None:
        async with self._starting:
            await self._restart()
