"""What every Jupyter-kernel executor shares: runs over one jupyter_client connection.

A run is one execute request of the kernel-side helper (`_kernel_side.run`),
read the idiomatic way: iopub messages filtered by parent id until `idle`,
then the shell reply. While it waits, the loop also watches the clock (timeout:
interrupt, then restart after a grace period), the cancel event (interrupt)
and the kernel itself (death: restart) — it never waits on a dead kernel.

Subclasses say where the kernel lives: `LocalKernel` (a process here),
`DockerKernel` (a process in a locked-down container), `RemoteKernel` (on a
Jupyter Server). They provide the abstract hooks below (launch, relaunch,
discard, interrupt, liveness, install, doctor's check); `executor.kinds` names
each kind with its config. A kernel drives a `KernelClient`: jupyter_client's
(local, container) or the remote server's WebSocket (`kernel_socket`).
"""

from __future__ import annotations

import ast
import asyncio
import functools
import json
import logging
import queue
import struct
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from executor.base import ExecutorState, ExecutorUnavailable
from executor.cancel import CANCELLED, or_cancelled
from executor.debugger import EventSink, KernelDebug, Page, page_call
from executor.events import (
    Error,
    Event,
    Guard,
    RunOutcome,
    RunRequest,
    RunStatus,
    Span,
    Stream,
    Usage,
    Variable,
)
from executor.foreign import R_VARIABLES, placed, r_variables, sent
from executor.install import InstallResult, refused
from executor.live import LiveAnswer, LiveDoor, LiveUnavailable, from_picture
from executor.messages import MessageCollector
from executor.shipped import modules_code
from executor.testing import TestResult, TestRun, run_pytest

log = logging.getLogger(__name__)

_POLL = 0.1  # seconds between looks at the clock, the cancel event and the kernel
_ALIVE_EVERY = 0.5  # seconds between liveness checks during a run
PICTURE_WAIT = 5.0  # seconds the kernel has to describe its namespace after a run
PICTURE_AFTER = 0.2  # seconds after a run before the picture (runs in a row take one)
LATE_LOOKS = (0.005, 0.05, 0.25, 1.0)
"""Seconds after another language's kernel answered a run when what it still published for
the run is looked for and taken as the run's (`_late_outputs`), unless the next run starts
first."""
HELPER_MODULES = ("_runfix_redact", "_runfix_guard", "_runfix_kernel", "_runfix_live")
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

DROPPED_LINE_ROOM = 100
"""Characters of a run's output, beyond `outputLimit`, for the line saying what was dropped."""
RESTARTED_NOTE = "Cancelled: the kernel was restarted, and its state was lost."

DIED_NOTE = (
    "The kernel died while running this (crash, os._exit or out of memory); "
    "it was restarted and its state was lost."
)


class NotReady(ExecutorUnavailable):
    """The kernel did not answer `kernel_info` in time."""


class JupyterKernel(ABC, Generic[C]):
    """The run loop, the queue and the lifecycle; where the kernel lives is the subclass's."""

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

    def install_blocked(self) -> str | None:
        """Why installing packages cannot work here (and how to allow it), else None."""
        if self.plain:
            return "runfix installs Python packages; this is another language's kernel"
        return None

    async def install(
        self,
        distributions: list[str],
        *,
        on_line: Say | None = None,
        cancel: asyncio.Event | None = None,
        timeout: float = 600.0,
    ) -> InstallResult:
        """Install distributions where the kernel imports from; streamed (`on_line`),
        cancellable. What is no distribution name, or cannot be installed here, is refused
        before anything runs."""
        if (refusal := refused(distributions)) is not None:
            return refusal
        if (why := self.install_blocked()) is not None:
            return InstallResult(False, why, [])
        return await self._install(distributions, on_line, cancel, timeout)

    @abstractmethod
    async def _install(
        self,
        distributions: list[str],
        on_line: Say | None,
        cancel: asyncio.Event | None,
        timeout: float,
    ) -> InstallResult:
        """Install valid distribution names where the kernel imports from."""

    async def run_tests(
        self,
        args: list[str],
        *,
        on_result: Callable[[TestResult], None] | None = None,
        cancel: asyncio.Event | None = None,
        timeout: float = 120.0,
        sources: Mapping[str, str] | None = None,
        guard: Guard | None = None,
        secret_names: Sequence[str] = (),
    ) -> TestRun:
        """The folder's tests (pytest with `args`) beside the kernel, in its interpreter:
        each result as it comes; a test running over `timeout` seconds stops the run;
        `sources`: module files imported from the text given (`testing.run_pytest`).
        `ExecutorUnavailable` where tests cannot run (another language, a remote server)."""
        if self.plain:
            raise ExecutorUnavailable("runfix runs pytest; this is another language's kernel")

        def hosted(result: TestResult) -> TestResult:
            frames = tuple(replace(f, path=self._host(f.path)) for f in result.frames)
            return replace(result, path=self._host(result.path), frames=frames)

        told = (lambda r: on_result(hosted(r))) if on_result is not None else None
        given = {self._inside(p): text for p, text in (sources or {}).items()}
        run = await run_pytest(
            self._command, self._interpreter(), args, on_result=told, cancel=cancel,
            timeout=timeout, sources={p: text for p, text in given.items() if p is not None},
            guard=guard, secret_names=secret_names,
        )  # fmt: skip
        run.results = [hosted(r) for r in run.results]
        return run

    def _host(self, path: str) -> str:
        """A path the kernel's side names, as the editor knows the file (here: the same)."""
        return path

    def _inside(self, path: str) -> str | None:
        """A file of the folder as the kernel's side names it (None: it cannot see it)."""
        return path

    def _interpreter(self) -> str:
        """The interpreter a command beside the kernel runs (`run_tests`)."""
        return "python3"

    async def _command(
        self, command: list[str], on_line: Say, cancel: asyncio.Event, timeout: float
    ) -> InstallResult:
        """Run `command` beside the kernel (a process of its interpreter, in its folder): its
        lines as they come; cancelled by `cancel`, killed after `timeout` seconds."""
        raise ExecutorUnavailable(f"runfix cannot run a command beside this {self.where}")

    @abstractmethod
    async def diagnose(self, say: Say) -> bool:
        """`runfix doctor`'s check of this kind of kernel: what it needs is here, it starts
        and runs something trivial (`try_start`); said line by line. True if it can run."""

    async def try_start(self, label: str, say: Say, *, shutdown: bool = True) -> bool:
        """Start the kernel, run something trivial, stop it (unless the caller will); say how
        long each took."""
        began = time.perf_counter()
        try:
            await self.start()
            started = time.perf_counter() - began
            doctor = str(self.folder / "<doctor>")
            outcome = await self.execute(RunRequest("1 + 1", doctor, timeout=30))
        except ExecutorUnavailable as exc:
            say(f"{label + ':':<15} FAILED — {exc}")
            return False
        finally:
            if shutdown:
                await self.shutdown()
        if outcome.status != RunStatus.OK:
            say(f"{label + ':':<15} started, but a trivial run ended {outcome.status.value}")
            return False
        say(f"{label + ' start:':<15} {started:.2f}s; trivial run {outcome.duration * 1000:.1f} ms")
        return True

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
        self._close_live()
        self._stop_late()
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None

    # -- questions while the user types (`live`) ---------------------------------------

    def _close_live(self) -> None:
        if self._live is not None:
            self._live.close()
            self._live = None

    async def ask_live(self, op: str, data: dict[str, Any], budget: float) -> LiveAnswer | None:
        """`_kernel_live`'s answer to `op` (complete, describe, signature) within `budget`
        seconds, never starting the kernel and never waiting for a run: a busy kernel
        without subshells is answered from the picture its last run left (`fresh` False).
        None: no kernel to ask (not started, starting, gone)."""
        if self.retired is not None or self._kc is None or not self.launched or self.plain:
            return None
        if self._state in (ExecutorState.NEW, ExecutorState.STARTING, ExecutorState.DEAD):
            return None
        door = self._live
        if door is None:
            door = await self._open_live()
            if door is None:
                return None
        # The queue held only to take a picture (below) is not a run: wait those few ms.
        picturing = self._picturing is not None and not self._picturing.done()
        busy = self._state == ExecutorState.BUSY or (self._queue.locked() and not picturing)
        try:
            if door.subshell is not None or (door.own and not busy):
                return LiveAnswer(await door.ask(op, data, budget))
            if not busy:  # the run's own channels: no run may read them meanwhile
                loop = asyncio.get_running_loop()
                until = loop.time() + budget
                # (a run queued meanwhile goes first: then the picture answers, in budget)
                await asyncio.wait_for(self._queue.acquire(), budget)
                try:
                    return LiveAnswer(await door.ask(op, data, max(until - loop.time(), 0.01)))
                finally:
                    self._queue.release()
        except (LiveUnavailable, asyncio.TimeoutError) as exc:
            log.info("%s for %s: %s", op, self.folder, exc)
        return LiveAnswer(from_picture(door.picture, op, data), fresh=False)

    async def _open_live(self) -> LiveDoor | None:
        async with self._live_opening:
            if self._live is not None:
                return self._live
            kc = self._kc
            if kc is None:
                return None
            try:
                door = await LiveDoor.open(kc)
            except Exception as exc:  # no door is no completion, never a failed request
                log.warning("could not open a way to ask the %s: %s", self.where, exc)
                return None
            if self._kc is not kc:  # restarted meanwhile
                door.close()
                return None
            self._live = door
            if door.subshell is None:
                self._refresh_picture(after=0)
            return door

    def _refresh_picture(self, *, after: float = PICTURE_AFTER) -> None:
        """Ask for the namespace in brief once the kernel is idle (kernels without subshells:
        what a busy kernel's completions are answered from), `after` seconds from now."""
        door = self._live
        if door is None or door.subshell is not None:
            return

        async def refresh() -> None:
            if after:
                await asyncio.sleep(after)
                if self._live is not door or self._queue.locked():
                    return  # another run began: the picture waits for the last one
            try:
                if door.own:
                    door.picture = await door.ask("picture", {}, PICTURE_WAIT)
                else:
                    async with self._queue:
                        door.picture = await door.ask("picture", {}, PICTURE_WAIT)
            except LiveUnavailable as exc:
                log.info("no picture of the namespace: %s", exc)

        task = self._picturing = asyncio.ensure_future(refresh())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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

    # -- running -------------------------------------------------------------------------

    async def execute(
        self,
        request: RunRequest,
        *,
        cancel: asyncio.Event | None = None,
        asked_at: float | None = None,
        ask_input: AskInput | None = None,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
        on_late: Callable[[tuple[Event, ...]], None] | None = None,
    ) -> RunOutcome:
        """Run the request; `asked_at` (loop time) is when the user asked, for `start()`.

        With `ask_input`, the code's `input()`/`getpass()` ask the user through it (None:
        they declined, and the run is cancelled); without, they raise as in a notebook
        that cannot ask. `on_stream` is told what the code prints as it comes; `on_output`
        the same with the statement that printed it. `on_late` is told the run's events
        again when another language's kernel publishes more for it after it said it was
        idle (Deno's sends a cell's value so, now and then): until the next run starts,
        for `LATE_WINDOW` seconds at most."""
        asked_at = asyncio.get_running_loop().time() if asked_at is None else asked_at
        async with self._queue:
            self._stop_late()
            if cancel is not None and cancel.is_set():
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note="cancelled before it ran")
            started = self.launched and self._start_task is None  # nothing to wait for
            if (
                not started
                and await or_cancelled(self.start(asked_at=asked_at), cancel) is CANCELLED
            ):
                note = f"Cancelled while the {self.where} was starting."
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note=note)
            note = ""
            lost = False
            if not await self.is_alive():
                cause = await self._death_cause()
                await self.restart()
                lost = True
                if cause:
                    note = f"Before this run: {cause}; {self._replaced}"
                else:
                    note = "The kernel had died since the last run; its state was lost."
            self._state = ExecutorState.BUSY
            self._running, self._interrupt_sent = True, False
            try:
                outcome = await self._run(request, cancel, ask_input, on_stream, on_output, on_late)
                if self.retired is not None:
                    return self._retired_outcome(outcome)
                if outcome.status == RunStatus.ERROR and not self.plain and _helper_gone(outcome):
                    log.warning("runfix's helper was gone from the kernel; loading it again")
                    await self._load_helper(self._channels)
                    outcome = await self._run(request, cancel, ask_input, on_stream, on_output)
                outcome = await self._after_run(outcome)
            except Exception:
                if self.retired is None:
                    raise
                return self._retired_outcome(None)  # its channels closed under the run
            finally:
                self._running = False
                if self._state == ExecutorState.BUSY:
                    self._state = ExecutorState.IDLE
            await self._restart_for_caller()  # asked for as the run ended
            if self._live is not None and self._live.subshell is None:
                self._refresh_picture()  # waits for the queue: after this run is answered
            if self._exited:
                self._exited = False
                await self._restart_locked()
                note = f"The code ended the kernel (exit()); {self._replaced}"
                outcome = replace(outcome, state_lost=True, note=note)
            if lost and not outcome.state_lost:
                outcome = replace(outcome, state_lost=True, note=outcome.note or note)
            return outcome

    def _retired_outcome(self, outcome: RunOutcome | None) -> RunOutcome:
        note = f"Cancelled: the kernel was replaced ({self.retired}); its state was lost."
        events = outcome.events if outcome is not None else ()
        duration = outcome.duration if outcome is not None else 0.0
        return RunOutcome(RunStatus.CANCELLED, events, duration, note=note, state_lost=True)

    async def _run(
        self,
        request: RunRequest,
        cancel: asyncio.Event | None,
        ask_input: AskInput | None,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
        on_late: Callable[[tuple[Event, ...]], None] | None = None,
    ) -> RunOutcome:
        kc = self._channels
        loop = asyncio.get_running_loop()
        began = loop.time()
        if self.plain:
            ran = self._ran.setdefault(request.filename, {})
            ran.update(
                (request.first_line + i, row) for i, row in enumerate(request.code.splitlines())
            )
        # Code that may hold a top-level `await` runs on the kernel's loop, as IPython runs it.
        entry = (
            "await __import__('_runfix_kernel').run_async"
            if _may_await(request.code)
            else "__import__('_runfix_kernel').run"
        )
        # Silent: IPython echoes nothing and counts nothing; the helper fires the events
        # IPython would have fired for an interactive cell (`_kernel_side._cell_info`).
        # Another language's kernel gets the code as it is, and echoes and counts it.
        msg_id = kc.execute(
            sent(request.code, self.language, request.first_line)
            if self.plain
            else (
                f"{entry}({request.code!r}, {request.filename!r}, "
                f"{request.first_line}, {request.output_limit}"
                # (the guard as a string: a dict literal in the request cost IPython 0.1 ms)
                + (f", {json.dumps(request.guard.said())!r})" if request.guard else ")")
            ),
            silent=not self.plain,
            store_history=self.plain,
            allow_stdin=ask_input is not None,
        )
        relay = _InputRelay(kc, msg_id, ask_input) if ask_input is not None else None
        # The kernel-side helper keeps `output_limit` characters of the code's own output,
        # plus the line saying how much it dropped between the head and the tail.
        collector = MessageCollector(request.output_limit + DROPPED_LINE_ROOM)
        try:
            outcome = await self._follow(
                request, cancel, kc, msg_id, began, relay, collector, on_stream, on_output
            )
        finally:
            if relay is not None:
                relay.close()
        if not self.plain:
            return outcome
        place = functools.partial(
            placed,
            language=self.language,
            code=request.code,
            first_line=request.first_line,
            filename=request.filename,
            ran=self._ran.get(request.filename),
        )
        if on_late is not None and outcome.status in (RunStatus.OK, RunStatus.ERROR):
            late = functools.partial(
                self._late_outputs, kc, msg_id, outcome, collector, place, on_late
            )
            self._late = asyncio.get_running_loop().call_later(LATE_LOOKS[0], late, 0)
        return place(outcome)

    def _late_outputs(
        self,
        kc: KernelClient,
        msg_id: str,
        outcome: RunOutcome,
        collector: MessageCollector,
        place: Callable[[RunOutcome], RunOutcome],
        on_late: Callable[[tuple[Event, ...]], None],
        look: int,
    ) -> None:
        """What another language's kernel published for a run after it said it was idle, and
        after its reply: against the protocol, Deno's sends a cell's value so now and then
        (1 run in 200 with both cores loaded). Looked for `LATE_LOOKS` after the answer, on
        a timer, not a read left waiting (cancelled at once when the next run starts:
        `_stop_late`); `on_late` is told the run's events with it. Nothing else reads IOPub
        between runs (another language's kernel has no live door)."""
        self._late = None
        told = tuple(collector.events)
        try:
            while (msg := kc.iopub_waiting()) is not None:
                if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] != "status":
                    collector.feed(msg)
        except Exception as exc:  # (the channels closed under it: the kernel went)
            log.info("stopped looking for the late outputs of a run: %s", exc)
            return
        if (events := tuple(collector.events)) != told:
            on_late(place(replace(outcome, events=events)).events)
        if look + 1 < len(LATE_LOOKS):
            later = functools.partial(
                self._late_outputs, kc, msg_id, outcome, collector, place, on_late, look + 1
            )
            wait = LATE_LOOKS[look + 1] - LATE_LOOKS[look]
            self._late = asyncio.get_running_loop().call_later(wait, later)

    def _stop_late(self) -> None:
        """The next run starts (the queue is held), or the channels close: late outputs of
        the last run are no longer looked for."""
        if (late := self._late) is not None:
            self._late = None
            late.cancel()

    async def _follow(
        self,
        request: RunRequest,
        cancel: asyncio.Event | None,
        kc: KernelClient,
        msg_id: str,
        began: float,
        relay: _InputRelay | None,
        collector: MessageCollector,
        on_stream: Callable[[str], None] | None = None,
        on_output: Callable[[Stream], None] | None = None,
    ) -> RunOutcome:
        """Read the run's messages into `collector` until the kernel is idle again, watching
        everything else."""
        loop = asyncio.get_running_loop()
        watch = _Watch(deadline=began + request.timeout, next_alive_check=began + _ALIVE_EVERY)
        while True:
            now = loop.time()
            ended = await self._between_messages(
                watch, now, request, cancel, relay, collector, began
            )
            if ended is not None:
                return ended
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
            if msg["msg_type"] == "stream":
                _pass_on(msg, collector, on_stream, on_output)
        reply = await self._drain_reply(msg_id)
        if self.plain:
            await self._trailing(kc, msg_id, collector)
        outcome = self._finished(watch.status, collector, request, began, reply)
        if watch.why and outcome.status == RunStatus.CANCELLED:
            outcome = replace(outcome, note=watch.why)
        return outcome

    async def _trailing(self, kc: KernelClient, msg_id: str, collector: MessageCollector) -> None:
        """What another language's kernel published for the request after it said it was
        idle, before its reply: against the protocol, Deno's kernel sends a cell's value so
        when the machine is busy (17 runs in 25 with both cores loaded); by its reply it is
        there. The Python kernel never does, and is not asked."""
        while True:
            try:
                msg = await kc.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            if msg["parent_header"].get("msg_id") == msg_id:
                collector.feed(msg)

    async def _between_messages(
        self,
        watch: _Watch,
        now: float,
        request: RunRequest,
        cancel: asyncio.Event | None,
        relay: _InputRelay | None,
        collector: MessageCollector,
        began: float,
    ) -> RunOutcome | None:
        """Between messages: a restart asked for, the kernel replaced, a cancel, the timeout,
        an interrupt ignored, the kernel dead. The run's outcome if it ends here, else None."""
        if self._restart_asked is not None:
            await self._restart_for_caller()
            return self._ended(
                RunStatus.CANCELLED, collector, began, lost=True, note=RESTARTED_NOTE
            )
        if self.retired is not None:  # another kernel replaces this one: stop waiting
            # (`execute` says why, for this and for a run that ended meanwhile)
            return self._ended(RunStatus.CANCELLED, collector, began, lost=True, note="")
        declined = relay is not None and not await relay.poll(now)
        if watch.interrupted_at is None:
            if (cancel is not None and cancel.is_set()) or declined:
                watch.status, watch.interrupted_at = RunStatus.CANCELLED, now
                if declined and not (cancel is not None and cancel.is_set()):
                    watch.why = INPUT_DECLINED_NOTE
                await self._interrupt()
            elif now >= watch.deadline + (relay.waited(now) if relay is not None else 0.0):
                watch.status, watch.interrupted_at = RunStatus.TIMEOUT, now
                await self._interrupt()
        elif now >= watch.interrupted_at + self.grace:
            log.warning("%s for %s ignored the interrupt; restarting it", self.where, self.folder)
            await self._restart_locked()
            note = _stopped_note(watch.status, request.timeout, restarted=True)
            return self._ended(watch.status, collector, began, lost=True, note=note)
        if now >= watch.next_alive_check:
            watch.next_alive_check = now + _ALIVE_EVERY
            if not await self.is_alive():
                return await self._died(collector, began)
        return None

    async def _died(self, collector: MessageCollector, began: float) -> RunOutcome:
        """The kernel died during a run: say why if it can be told, and start a new one."""
        cause = await self._death_cause()
        note = f"{cause}: {self._replaced}" if cause else DIED_NOTE
        log.warning("%s for %s died during a run: %s", self.where, self.folder, note)
        where = self._last_statement()
        await self._restart_locked()
        outcome = self._ended(RunStatus.DIED, collector, began, lost=True, note=note)
        return replace(outcome, span=where or outcome.span)

    def _finished(
        self,
        status: RunStatus,
        collector: MessageCollector,
        request: RunRequest,
        began: float,
        reply: dict[str, Any] | None,
    ) -> RunOutcome:
        """The outcome of a run the kernel finished (idle again)."""
        if status == RunStatus.OK and collector.interrupted is not None:
            if self._interrupt_sent:
                status = RunStatus.CANCELLED
            else:  # `raise KeyboardInterrupt` in the code: an error like any other
                collector.events.append(collector.interrupted)
        if status == RunStatus.OK and any(isinstance(e, Error) for e in collector.events):
            status = RunStatus.ERROR
        self._exited = collector.exited
        note = _stopped_note(status, request.timeout, restarted=False)
        if collector.strays:
            dropped = f"{collector.strays:,} characters a thread of an earlier run printed"
            log.info("dropped %s during this run", dropped)
            note = f"{note} Dropped: {dropped}.".strip()
        outcome = self._ended(status, collector, began, lost=False, note=note)
        if collector.refused:
            outcome = replace(outcome, refused=tuple(collector.refused))
        if reply is None:
            return outcome
        count = reply.get("content", {}).get("execution_count")
        count = count if isinstance(count, int) and count > 0 else None
        return replace(outcome, usage=_usage(reply), execution_count=count)

    async def _drain_reply(self, msg_id: str) -> dict[str, Any] | None:
        """Take our shell reply off the channel (and any stale ones before it)."""
        while True:
            try:
                reply: dict[str, Any] = await self._channels.get_shell_msg(timeout=1.0)
            except queue.Empty:
                return None
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

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
            span=collector.span if status != RunStatus.OK or collector.exited else None,
        )

    async def debugger(self, on_event: EventSink) -> KernelDebug:
        """A client of the kernel's own debugger, beside the run's channels (started first if
        it is not); DebugUnavailable, in one sentence naming the kernel, where it has none."""
        await self.start()
        _, _, spec = self.label.partition(" · ")
        name = f"The {spec} kernel" if spec else f"The {self.where}"
        return await KernelDebug.open(self._channels, on_event, name)

    async def debug_documents(self) -> dict[str, list[str]]:
        """Each document's lines as the kernel last ran them; its debugger told of those that
        are no file on disk, as it starts (`_runfix_kernel.see_documents`). Empty where the
        helper could not say."""
        held = await self._helper("__import__('_runfix_kernel').see_documents()")
        if not isinstance(held, dict):
            return {}
        return {str(k): [str(x) for x in v] for k, v in held.items()}

    async def last_error(self) -> dict[str, Any] | None:
        """The kernel's last error (kind, text) and its frames in the user's code, from the
        traceback it keeps; None where it holds none."""
        found = await self._helper("__import__('_runfix_live').debug_postmortem('frames')")
        return found if isinstance(found, dict) and found.get("frames") else None

    async def last_error_page(self, page: Page) -> dict[str, Any]:
        """A page of values in a frame of the kernel's last error (`debug_postmortem`)."""
        call = f"__import__('_runfix_live').debug_postmortem('children', {page_call(page)})"
        said = await self._helper(call)
        return said if isinstance(said, dict) else {"error": "the kernel did not answer"}

    async def _helper(self, call: str) -> Any:
        """What a call of runfix's Python helper answers (JSON it returns as a string), asked
        as a silent user expression; None where it failed or for another language's kernel
        (the helper is Python)."""
        if self.plain:
            return None
        async with self._queue:
            await self.start()
            reply = await self._channels.execute_interactive(
                "", silent=True, store_history=False, user_expressions={"v": call}, timeout=10
            )
        raw = reply["content"].get("user_expressions", {}).get("v", {})
        if raw.get("status") != "ok":
            return None
        return json.loads(ast.literal_eval(raw["data"]["text/plain"]))

    async def variables(self, secret_names: Sequence[str] = ()) -> list[Variable]:
        """The kernel's names in brief, a secret's value hidden (`executor.redact`; with the
        user's `secret_names` too)."""
        if self.plain:
            return await self._foreign_variables()
        items = await self._helper(
            f"__import__('_runfix_live').variables(200, {list(secret_names)!r})"
        )
        return [
            Variable(
                name=i["name"],
                type=i["type"],
                summary=i.get("summary", ""),
                shape=tuple(i["shape"]) if "shape" in i else None,
                length=i.get("length"),
                columns=i.get("columns", {}),
            )
            for i in items or []
        ]

    async def _foreign_variables(self) -> list[Variable]:
        """Another language's variables, where runfix knows how to list them (R: by R's own
        `ls()`, run as a silent run of runfix's; a silent request shows R nothing back)."""
        if self.language.lower() != "r":
            return []
        request = RunRequest(R_VARIABLES, "<runfix variables>", timeout=10)
        try:
            outcome = await self.execute(request)
        finally:
            self._ran.pop(request.filename, None)
        return r_variables(outcome) if outcome.status == RunStatus.OK else []

    async def evidence(
        self, ename: str, line: int, secret_names: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """What the frames of the last error held (`_kernel_live.evidence`), if the last
        error is `ename` raised on `line` of the user's code (0: whatever it was); None
        when it is not, or for another language's kernel. Secrets hidden as `variables`."""
        found = await self._helper(
            f"__import__('_runfix_live').evidence({ename!r}, {int(line)}, {list(secret_names)!r})"
        )
        return found if isinstance(found, dict) else None


AskInput = Callable[[str, bool], Awaitable["str | None"]]
"""Ask the user for a line of input: (prompt, password) → the line, or None if declined."""


@dataclass
class _Watch:
    """What a run's watch keeps between messages."""

    deadline: float
    next_alive_check: float
    status: RunStatus = RunStatus.OK
    interrupted_at: float | None = None
    """When the run was interrupted (cancelled or timed out); then `grace` counts."""
    why: str | None = None
    """Why it was cancelled, where more than "interrupted" can be said."""


def _pass_on(
    msg: dict[str, Any],
    collector: MessageCollector,
    on_stream: Callable[[str], None] | None,
    on_output: Callable[[Stream], None] | None,
) -> None:
    """A stream message, as it comes, to whoever follows the run's output."""
    text = str(msg["content"].get("text", ""))
    if on_stream is not None:
        on_stream(text)
    if on_output is not None:
        on_output(Stream(str(msg["content"].get("name", "stdout")), text, collector.span))


class _InputRelay:
    """The kernel's input requests during one run, each answered by asking the user.

    The time spent waiting for the user does not count against the run's timeout."""

    def __init__(self, kc: KernelClient, msg_id: str, ask: AskInput) -> None:
        self.kc, self.msg_id, self.ask = kc, msg_id, ask
        self._asking: asyncio.Future[str | None] | None = None
        self._since = 0.0
        self._waited = 0.0

    def waited(self, now: float) -> float:
        return self._waited + (now - self._since if self._asking is not None else 0.0)

    async def poll(self, now: float) -> bool:
        """Take a new request or hand over an answer; False once the user declined."""
        if self._asking is None:
            try:
                msg = await self.kc.get_stdin_msg(timeout=0)
            except queue.Empty:
                return True
            ours = msg["parent_header"].get("msg_id") == self.msg_id
            if ours and msg["msg_type"] == "input_request":
                content = msg["content"]
                prompt, password = str(content.get("prompt", "")), bool(content.get("password"))
                self._asking = asyncio.ensure_future(self.ask(prompt, password))
                self._since = now
            return True
        if not self._asking.done():
            return True
        asking, self._asking = self._asking, None
        self._waited += now - self._since
        try:
            value = asking.result()
        except Exception as exc:  # the client could not ask: as if declined
            log.warning("asking for input failed: %s", exc)
            value = None
        if value is None:
            return False
        self.kc.input(value)
        return True

    def close(self) -> None:
        if self._asking is not None:
            self._asking.cancel()


def _usage(reply: dict[str, Any]) -> Usage | None:
    """A run's figures from its reply's payload (None when the kernel could not say)."""
    for payload in reply.get("content", {}).get("payload") or ():
        if isinstance(payload, dict) and payload.get("source") == "runfix-usage":
            figures = payload.get("usage") or {}
            try:
                return Usage(
                    cpu=float(figures["cpu"]),
                    rss_before=figures.get("rss_before"),
                    rss_after=figures.get("rss_after"),
                    peak=figures.get("peak"),
                )
            except (KeyError, TypeError, ValueError):
                return None
    return None


def _may_await(code: str) -> bool:
    """Whether the code could hold a top-level `await` (`async for`/`async with` too)."""
    return "await" in code or "async" in code


def _helper_gone(outcome: RunOutcome) -> bool:
    """The code deleted runfix's helper module, so the call to it failed."""
    error = outcome.error
    return error is not None and not error.frames and "_runfix_kernel" in error.evalue


INPUT_DECLINED_NOTE = (
    "Cancelled: input() got no answer (declined, timed out, or not text), so the kernel was "
    "interrupted. Its state is kept."
)


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


Kernel = JupyterKernel[Any]
"""A kernel of any kind, as the services hold it."""
