"""What every Jupyter-kernel executor shares, in layers, each a module by concern:
`kernel_channels` (`KernelLifecycle`: the connection, the state, start, restart, stop),
`kernel_asked_live` (`LiveKernel`: questions while the user types), `run_loop`
(`RunningKernel`: the runs, one at a time, each followed to its end), and here
(`JupyterKernel`): what runfix's helper is asked, installs, the project's tests, the
doctor's check.

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
import json
import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from executor.base import ExecutorUnavailable
from executor.debugger import EventSink, KernelDebug, Page, page_call
from executor.events import (
    Guard,
    RunRequest,
    RunStatus,
    Variable,
)
from executor.foreign import R_VARIABLES, r_variables
from executor.install import InstallResult, refused
from executor.kernel_channels import C, Say
from executor.run_loop import RunningKernel
from executor.testing import TestResult, TestRun, run_pytest

log = logging.getLogger(__name__)


class JupyterKernel(RunningKernel[C]):
    """A Jupyter kernel as runfix uses it: run in (`RunningKernel`), asked while the user
    types (`LiveKernel`), started and stopped (`KernelLifecycle`); here, what its helper is
    asked (variables, evidence, the last error, the debugger), installs and the project's
    tests beside it, and `runfix doctor`'s check."""

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

    async def defined_at(self, names: list[str]) -> dict[str, tuple[str, int]]:
        """Where each of `names` the kernel holds as a function runfix ran was last defined
        (document, first line from 1: `_runfix_kernel.defined_at`); empty where it cannot say."""
        found = await self._helper(f"__import__('_runfix_kernel').defined_at({names!r})")
        if not isinstance(found, dict):
            return {}
        return {
            str(k): (str(v[0]), int(v[1]))
            for k, v in found.items()
            if isinstance(v, list) and len(v) == 2 and isinstance(v[1], int)
        }

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


Kernel = JupyterKernel[Any]
"""A kernel of any kind, as the services hold it."""
