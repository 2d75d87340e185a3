"""A local Jupyter kernel as an `Executor`, on jupyter_client's async API.

The kernel runs on the folder's interpreter with the folder as its cwd and
talks over IPC sockets in a private 0700 directory (never TCP ports). It is
started with `JPY_PARENT_PID`, so it exits by itself if the server is killed.

A run is one execute request of the kernel-side helper (`_kernel_side.run`),
read the idiomatic way: iopub messages filtered by parent id until `idle`,
then the shell reply. While it waits, the loop also watches the clock (timeout:
interrupt, then restart after a grace period), the cancel event (interrupt)
and the kernel process (death: restart) — it never waits on a dead kernel.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from executor import _kernel_side
from executor.base import ExecutorState, ExecutorUnavailable
from executor.events import Error, RunOutcome, RunRequest, RunStatus, Variable
from executor.interpreter import install_hint, ipykernel_version
from executor.messages import MessageCollector

log = logging.getLogger(__name__)

_POLL = 0.1  # seconds between looks at the clock, the cancel event and the process
_HELPER = (
    "import sys as _s, types as _t\n"
    "_m = _t.ModuleType('_runfix_kernel')\n"
    "exec({source!r}, _m.__dict__)\n"
    "_s.modules['_runfix_kernel'] = _m\n"
    "del _s, _t, _m\n"
)

_HELPER_CODE = _HELPER.format(source=Path(_kernel_side.__file__).read_text(encoding="utf-8"))


class _OneSpec(KernelSpecManager):
    """Hands jupyter_client our own kernel spec instead of looking one up on disk."""

    def __init__(self, spec: KernelSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._spec = spec

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return self._spec

    def find_kernel_specs(self) -> dict[str, str]:
        return {}


def kernel_environment(
    python: str, base: Mapping[str, str] | None = None, hidden: Iterable[str] = ()
) -> dict[str, str]:
    """The environment the kernel gets: ours, minus secrets, plus the interpreter's venv."""
    env = dict(os.environ if base is None else base)
    for name in hidden:
        env.pop(name, None)
    env.pop("PYTHONSTARTUP", None)
    bindir = Path(python).parent
    if (bindir.parent / "pyvenv.cfg").exists():
        env["VIRTUAL_ENV"] = str(bindir.parent)
        env["PATH"] = os.pathsep.join([str(bindir), env.get("PATH", "")])
    return env


class LocalKernel:
    def __init__(
        self,
        folder: Path,
        python: str,
        *,
        hidden_env: Iterable[str] = (),
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> None:
        self.folder = folder
        self.python = python
        self.grace = grace
        self.startup_timeout = startup_timeout
        self.hidden_env = tuple(sorted(set(hidden_env)))
        self._state = ExecutorState.NEW
        self._km: AsyncKernelManager | None = None
        self._kc: Any = None
        self._runtime: Path | None = None
        self._queue = asyncio.Lock()  # FIFO: runs in one folder queue in order
        self._starting = asyncio.Lock()
        self.started_in: float | None = None
        """Seconds the last (re)start took, for `runfix doctor` and benchmarks."""

    @property
    def state(self) -> ExecutorState:
        return self._state

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        async with self._starting:
            if self._km is not None:
                return
            self._state = ExecutorState.STARTING
            try:
                await self._launch()
            except BaseException:
                self._state = ExecutorState.DEAD
                await self._discard()
                raise
            self._state = ExecutorState.IDLE

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
        await km.start_kernel(cwd=str(self.folder), env=env)
        await self._connect()
        self.started_in = time.perf_counter() - began
        log.info("kernel for %s ready in %.2fs (%s)", self.folder, self.started_in, self.python)

    async def _connect(self) -> None:
        assert self._km is not None
        if self._kc is not None:
            self._kc.stop_channels()
        kc = self._km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=self.startup_timeout)
        except RuntimeError as exc:
            kc.stop_channels()
            raise ExecutorUnavailable(f"The kernel did not start: {exc}") from exc
        self._kc = kc
        reply = await kc.execute_interactive(
            _HELPER_CODE,
            silent=True,
            store_history=False,
            allow_stdin=False,
            timeout=self.startup_timeout,
        )
        if reply["content"]["status"] != "ok":
            raise ExecutorUnavailable(f"runfix could not set up the kernel: {reply['content']}")

    async def _discard(self) -> None:
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            try:
                await self._km.shutdown_kernel(now=True)
            except Exception:
                log.exception("killing the kernel for %s failed", self.folder)
            self._km = None
        if self._runtime is not None:
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None

    async def shutdown(self) -> None:
        async with self._starting:
            if self._kc is not None and self._km is not None:
                try:
                    await asyncio.wait_for(self._km.shutdown_kernel(now=False), 5)
                except (asyncio.TimeoutError, Exception):
                    log.warning("kernel for %s did not stop in time; killing it", self.folder)
            await self._discard()
            self._state = ExecutorState.STOPPED

    async def restart(self) -> None:
        async with self._starting:
            await self._restart()

    async def _restart(self) -> None:
        """Replace the kernel process (now), keeping the connection and the runtime dir."""
        if self._km is None:
            await self._launch()
            self._state = ExecutorState.IDLE
            return
        self._state = ExecutorState.STARTING
        began = time.perf_counter()
        try:
            await self._km.restart_kernel(now=True)
            await self._connect()
        except BaseException:
            self._state = ExecutorState.DEAD
            raise
        self.started_in = time.perf_counter() - began
        self._state = ExecutorState.IDLE

    async def interrupt(self) -> None:
        if self._km is not None and await self._km.is_alive():
            await self._km.interrupt_kernel()

    async def is_alive(self) -> bool:
        return self._km is not None and bool(await self._km.is_alive())

    # -- running -------------------------------------------------------------------

    async def execute(
        self, request: RunRequest, *, cancel: asyncio.Event | None = None
    ) -> RunOutcome:
        async with self._queue:
            if cancel is not None and cancel.is_set():
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note="cancelled before it ran")
            await self.start()
            note = ""
            lost = False
            if not await self.is_alive():
                await self.restart()
                note, lost = "The kernel had died since the last run; its state was lost.", True
            self._state = ExecutorState.BUSY
            try:
                outcome = await self._run(request, cancel)
            finally:
                if self._state == ExecutorState.BUSY:
                    self._state = ExecutorState.IDLE
            if lost and not outcome.state_lost:
                outcome = replace(outcome, state_lost=True, note=outcome.note or note)
            return outcome

    async def _run(self, request: RunRequest, cancel: asyncio.Event | None) -> RunOutcome:
        kc = self._kc
        loop = asyncio.get_running_loop()
        began = loop.time()
        code = (
            f"__import__('_runfix_kernel').run({request.code!r}, {request.filename!r}, "
            f"{request.first_line}, {request.output_limit})"
        )
        msg_id = kc.execute(code, silent=False, store_history=False, allow_stdin=False)
        collector = MessageCollector(request.output_limit)
        deadline = began + request.timeout
        interrupted_at: float | None = None
        status = RunStatus.OK
        next_alive_check = began + 0.5
        while True:
            now = loop.time()
            if interrupted_at is None:
                if cancel is not None and cancel.is_set():
                    status, interrupted_at = RunStatus.CANCELLED, now
                    await self.interrupt()
                elif now >= deadline:
                    status, interrupted_at = RunStatus.TIMEOUT, now
                    await self.interrupt()
            elif now >= interrupted_at + self.grace:
                log.warning("kernel for %s ignored the interrupt; restarting it", self.folder)
                await self._restart_locked()
                return self._ended(
                    status,
                    collector,
                    began,
                    lost=True,
                    note=_stopped_note(status, request.timeout, restarted=True),
                )
            if now >= next_alive_check:
                next_alive_check = now + 0.5
                if not await self.is_alive():
                    log.warning("kernel for %s died during a run; restarting it", self.folder)
                    await self._restart_locked()
                    return self._ended(
                        RunStatus.DIED,
                        collector,
                        began,
                        lost=True,
                        note="The kernel died while running this (crash, os._exit or out of "
                        "memory); it was restarted and its state was lost.",
                    )
            try:
                msg = await kc.get_iopub_msg(timeout=_POLL)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status":
                if msg["content"].get("execution_state") == "idle":
                    break
                continue
            collector.feed(msg)
        await self._drain_reply(msg_id)
        if status == RunStatus.OK:
            if collector.interrupted:
                status = RunStatus.CANCELLED
            elif any(isinstance(e, Error) for e in collector.events):
                status = RunStatus.ERROR
        note = _stopped_note(status, request.timeout, restarted=False)
        return self._ended(status, collector, began, lost=False, note=note)

    async def _restart_locked(self) -> None:
        async with self._starting:
            await self._restart()

    async def _drain_reply(self, msg_id: str) -> None:
        """Take our shell reply off the channel (and any stale ones before it)."""
        while True:
            try:
                reply = await self._kc.get_shell_msg(timeout=1.0)
            except queue.Empty:
                return
            if reply["parent_header"].get("msg_id") == msg_id:
                return

    def _ended(
        self,
        status: RunStatus,
        collector: MessageCollector,
        began: float,
        *,
        lost: bool,
        note: str,
    ) -> RunOutcome:
        return RunOutcome(
            status=status,
            events=tuple(collector.events),
            duration=asyncio.get_running_loop().time() - began,
            truncated=collector.truncated,
            state_lost=lost,
            note=note,
            span=collector.span if status != RunStatus.OK else None,
        )

    async def variables(self) -> list[Variable]:
        async with self._queue:
            await self.start()
            reply = await self._kc.execute_interactive(
                "",
                silent=True,
                store_history=False,
                user_expressions={"v": "__import__('_runfix_kernel').variables()"},
                timeout=10,
            )
        raw = reply["content"].get("user_expressions", {}).get("v", {})
        if raw.get("status") != "ok":
            return []
        items = json.loads(ast.literal_eval(raw["data"]["text/plain"]))
        return [
            Variable(
                name=i["name"],
                type=i["type"],
                summary=i.get("summary", ""),
                shape=tuple(i["shape"]) if "shape" in i else None,
                length=i.get("length"),
                columns=i.get("columns", {}),
            )
            for i in items
        ]


def _stopped_note(status: RunStatus, timeout: float, *, restarted: bool) -> str:
    lost = (
        " The kernel did not stop, so it was restarted and its state was lost." if restarted else ""
    )
    if status == RunStatus.TIMEOUT:
        kept = "" if restarted else " Its state is kept."
        return f"Timed out after {timeout:g}s and was interrupted.{kept}{lost}"
    if status == RunStatus.CANCELLED:
        return "Cancelled: the kernel was interrupted." + lost
    return ""
