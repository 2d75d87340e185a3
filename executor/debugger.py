"""The kernel's own debugger, reached beside the run's channels (the Jupyter debugger
protocol: DAP inside `debug_request` / `debug_reply` on the control channel, its events as
`debug_event` on IOPub; ipykernel 6 and later run debugpy inside).

A client of its own, as the live door has: its control replies and its IOPub are read by
it alone, so a run's messages are never taken from the run that waits for them, and the
debugger is answered while a cell runs (ipykernel answers control on a thread of its own).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import itertools
import json
import logging
import queue
from collections.abc import Callable, Sequence
from typing import Any

from executor.kernel_socket import KernelSocket

log = logging.getLogger(__name__)

ANSWER_WITHIN = 15.0
"""Seconds the kernel's debugger has to answer a request (debugpy answers in ~50 ms; its
first `attach` starts debugpy in the kernel: ~0.2 s)."""
INFO_WITHIN = 3.0
"""Seconds a kernel has to say whether it has a debugger (`kernel_info` on control)."""

EventSink = Callable[[dict[str, Any]], None]

Page = tuple[Sequence[Any], str, Sequence[Any], int, int, Sequence[str]]
"""A page of a frame's values: the frame (file, function, line, depth among its likes), its
scope ("locals" or "globals"), the steps to a value in it, from, how many, secret names."""


def page_call(page: Page) -> str:
    """`page` as the arguments of `_runfix_live.debug_frame` (and of `debug_postmortem`,
    after its first)."""
    where, scope, path, start, count, names = page
    hide = scope == "globals" and not path  # (a frame's globals: the user's names alone)
    return f"{list(where)!r}, {scope!r}, {list(path)!r}, {start}, {count}, {list(names)!r}, {hide}"


"""Told each DAP event the kernel's debugger sends (`stopped`, `output`, …)."""


class DebugUnavailable(Exception):
    """The kernel cannot be debugged; its message says why, in one sentence."""


class KernelDebug:
    """One debugging client of one kernel: DAP requests to its debugger, its events to
    `on_event`."""

    def __init__(self, kc: Any, on_event: EventSink) -> None:
        self.kc = kc
        self.on_event = on_event
        self._seq = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.closed = False

    @classmethod
    async def open(cls, main: Any, on_event: EventSink, name: str) -> KernelDebug:
        """A debugging client beside the run's client `main`, once the kernel said it has a
        debugger; DebugUnavailable (naming the kernel, `name`) where it has none or cannot
        be reached so."""
        if isinstance(main, KernelSocket):  # a remote kernel: its control over the WebSocket
            debug: KernelDebug = _RemoteDebug(main, on_event)
        else:
            debug = await cls._beside(main, on_event)
        why = await debug._has_none()
        if why is not None:
            debug.close()
            raise DebugUnavailable(
                f"{name} has no debugger ({why}): runfix runs its cells, and cannot stop in them"
            )
        return debug

    @classmethod
    async def _beside(cls, main: Any, on_event: EventSink) -> KernelDebug:
        side = type(main)()
        side.load_connection_info(main.get_connection_info())
        side.session.key = main.session.key
        side.start_channels(shell=False, stdin=False, hb=False)
        debug = cls(side, on_event)
        debug._tasks = [
            asyncio.ensure_future(debug._read_control()),
            asyncio.ensure_future(debug._read_iopub()),
        ]
        return debug

    async def _has_none(self) -> str | None:
        """Why the kernel has no debugger, or None: it has one. Its word is not taken alone:
        ipykernel's base class says `debugger` for every kernel built on it (bash_kernel),
        and a server between may leave it out, so a `debugInfo` (which starts nothing) must
        be answered."""
        try:
            info = await self._ask("kernel_info_request", {}, INFO_WITHIN)
        except DebugUnavailable:
            return f"it did not answer on its control channel within {INFO_WITHIN:g} s"
        # ipykernel 6 says `debugger: true`; 7 lists it in `supported_features` (JEP 92); a
        # Jupyter server between may say neither (Enterprise Gateway's): then ask.
        features = info.get("supported_features") or ()
        if info.get("debugger") is False and "debugger" not in features:
            return "its kernel_info says so"
        try:
            said = await self.request("debugInfo", within=INFO_WITHIN)
        except DebugUnavailable:
            return "it did not answer the debugger's first request"
        if not said.get("success"):
            return "it does not answer the debugger's requests"
        return None

    async def request(
        self, command: str, arguments: dict[str, Any] | None = None, within: float = ANSWER_WITHIN
    ) -> dict[str, Any]:
        """The kernel debugger's response to a DAP request (`success` false says why)."""
        message = {
            "type": "request",
            "seq": next(self._seq),
            "command": command,
            "arguments": arguments or {},
        }
        return await self._ask("debug_request", message, within)

    async def frame_page(self, frame: int, page: Page) -> dict[str, Any]:
        """A page of values in the stopped `frame`, read by runfix's inspector evaluated there
        (`_runfix_live.debug_frame`: nothing of the user's code runs): its JSON."""
        expression = f"__import__('_runfix_live').debug_frame({page_call(page)})"
        answer = await self.request(
            "evaluate", {"expression": expression, "frameId": frame, "context": "clipboard"}
        )
        if not answer.get("success", False):
            raise DebugUnavailable(str(answer.get("message") or "the values could not be read"))
        try:
            said = json.loads(ast.literal_eval(str((answer.get("body") or {}).get("result", ""))))
        except (ValueError, SyntaxError) as exc:
            raise DebugUnavailable(f"the variables could not be read: {exc}") from None
        return said if isinstance(said, dict) else {"error": "the kernel did not answer"}

    async def _ask(self, msg_type: str, content: dict[str, Any], within: float) -> dict[str, Any]:
        if self.closed:
            raise DebugUnavailable("the debugger's connection to the kernel is closed")
        msg = self.kc.session.msg(msg_type, content)
        answer = asyncio.get_running_loop().create_future()
        self._waiting[msg["header"]["msg_id"]] = answer
        self.kc.control_channel.send(msg)
        try:
            return await asyncio.wait_for(answer, within)
        except asyncio.TimeoutError:
            raise DebugUnavailable(
                f"the kernel's debugger did not answer {content.get('command', msg_type)} "
                f"within {within:.0f} s"
            ) from None
        finally:
            self._waiting.pop(msg["header"]["msg_id"], None)

    async def _read_control(self) -> None:
        while not self.closed:
            try:
                reply = await self.kc.get_control_msg(timeout=0.5)
            except queue.Empty:
                continue
            except Exception as exc:  # the channels closed under it
                _ended("control channel", exc, self.closed)
                return
            waiting = self._waiting.get((reply.get("parent_header") or {}).get("msg_id", ""))
            if waiting is not None and not waiting.done():
                waiting.set_result(reply.get("content") or {})

    async def _read_iopub(self) -> None:
        while not self.closed:
            try:
                msg = await self.kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            except Exception as exc:
                _ended("IOPub", exc, self.closed)
                return
            if msg.get("msg_type") == "debug_event":
                try:
                    self.on_event(msg.get("content") or {})
                except Exception:  # one bad event never ends the reading
                    log.exception("a debug event could not be passed on")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in self._tasks:
            task.cancel()
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.cancel()
        with contextlib.suppress(Exception):
            self.kc.stop_channels()


class _RemoteDebug(KernelDebug):
    """The debugger of a kernel on a Jupyter Server: requests on the control channel of the
    run's own WebSocket (one connection per kernel), events taken off its IOPub before the
    runs' queue."""

    def __init__(self, kc: KernelSocket, on_event: EventSink) -> None:
        super().__init__(kc, on_event)
        kc.on_debug_event = self._event

    def _event(self, content: dict[str, Any]) -> None:
        try:
            self.on_event(content)
        except Exception:
            log.exception("a debug event could not be passed on")

    async def _ask(self, msg_type: str, content: dict[str, Any], within: float) -> dict[str, Any]:
        if self.closed or self.kc.closed:
            raise DebugUnavailable("the debugger's connection to the kernel is closed")
        try:
            reply = await self.kc.control(msg_type, content, within)
        except asyncio.TimeoutError:
            raise DebugUnavailable(
                f"the kernel's debugger did not answer {content.get('command', msg_type)} "
                f"within {within:.0f} s (its server may have dropped the connection)"
            ) from None
        return dict(reply.get("content") or {})

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.kc.on_debug_event == self._event:
                self.kc.on_debug_event = None


def _ended(channel: str, exc: Exception, closing: bool) -> None:
    """A channel's reader ended: news only where runfix was not closing it (a session's end
    closes the sockets under the readers, every time)."""
    log.log(logging.DEBUG if closing else logging.INFO, "the debugger's %s ended: %s", channel, exc)
