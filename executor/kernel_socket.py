"""One kernel's channels over a Jupyter Server's kernel WebSocket, as the run loop reads a
jupyter_client client (`remote.RemoteKernel` drives it)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import queue
import socket
import ssl
import struct
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from executor.base import short_error

log = logging.getLogger(__name__)

MAX_MESSAGE = 256 * 1024 * 1024
"""The largest WebSocket message taken (a kernel's image output, base64)."""


class _Connect(connect):
    def process_redirect(self, exc: Exception) -> Exception:
        return exc  # not followed: the Authorization header would go along


class KernelSocket:
    """One kernel's channels over the server's WebSocket.

    It answers the calls the run loop makes of a jupyter_client client:
    `execute` and `input` queue a message and return at once; `get_*_msg` wait
    for one with a timeout (`queue.Empty`); `execute_interactive` and
    `wait_for_ready` wait for their own reply. The messages of those two
    never reach the queues. While the connection is down, what is sent waits
    for the next one."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        tls: ssl.SSLContext | None,
        on_drop: Callable[[KernelSocket], None],
    ) -> None:
        self.session = uuid.uuid4().hex
        self._url = f"{url}?session_id={self.session}"
        self._headers, self._tls, self._on_drop = headers, tls, on_drop
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._outbox: asyncio.Queue[str] = asyncio.Queue()
        self._queues = {name: _Box() for name in ("iopub", "shell", "stdin")}
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._quiet: set[str] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self.connected = asyncio.Event()
        self.closed = False
        self.heard = 0.0
        """Loop time of the last message from the kernel (or of the connection)."""
        self.kernel_restarted: str | None = None
        """Once the kernel's state is gone: "restarting" or "dead" (the server said it died),
        "restarted" or "shutdown" (someone else did it; ipykernel said so)."""
        self.on_debug_event: Callable[[dict[str, Any]], None] | None = None
        """Told each `debug_event` the kernel publishes while its debugger is used (they never
        reach the runs' queue then)."""

    # -- the connection ----------------------------------------------------------------

    async def open(self, timeout: float) -> None:
        """Connect (again, with the same session: the server replays what it kept)."""
        ws = await _Connect(
            self._url,
            additional_headers=self._headers,
            ssl=self._tls,
            open_timeout=timeout,
            max_size=MAX_MESSAGE,
            max_queue=None,
            ping_interval=20,
            ping_timeout=20,
            user_agent_header="runfix",
        )
        if self.closed:
            await ws.close()
            return
        self._ws = ws
        self.heard = asyncio.get_running_loop().time()
        self._reader = asyncio.ensure_future(self._read(ws))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write())
        self.connected.set()

    async def _read(self, ws: ClientConnection) -> None:
        sock = ws.transport.get_extra_info("socket")
        try:
            async for frame in ws:
                _ack_now(sock)
                msg = _decode(frame)
                if msg is not None:
                    self._take(msg)
        except WebSocketException as exc:
            log.info("the kernel's WebSocket closed: %s", short_error(exc))
        except Exception:
            log.exception("reading the kernel's WebSocket failed")
        finally:
            if self._ws is ws:
                self._ws = None
                self.connected.clear()
                if not self.closed:
                    self._on_drop(self)

    async def _write(self) -> None:
        while True:
            text = await self._outbox.get()
            while True:
                await self.connected.wait()
                ws = self._ws
                if ws is None:
                    continue
                try:
                    await ws.send(text)
                    break
                except WebSocketException:
                    self.connected.clear()  # sent again once reconnected

    def _take(self, msg: dict[str, Any]) -> None:
        self.heard = asyncio.get_running_loop().time()
        channel = msg.get("channel")
        parent = str((msg.get("parent_header") or {}).get("msg_id") or "")
        if channel == "iopub":
            if msg.get("msg_type") == "debug_event" and self.on_debug_event is not None:
                self.on_debug_event(msg.get("content") or {})
                return
            if msg.get("msg_type") == "shutdown_reply" and parent not in self._quiet:
                # Someone else shut the kernel down (the idle culler, a DELETE) or restarted it
                # (JupyterLab's Restart): ipykernel says so to every client.
                restart = bool((msg.get("content") or {}).get("restart"))
                self.kernel_restarted = "restarted" if restart else "shutdown"
            if msg.get("msg_type") == "status":
                state = (msg.get("content") or {}).get("execution_state")
                if not parent and state in ("restarting", "dead"):
                    self.kernel_restarted = state
                if parent in self._quiet:
                    if state == "idle":
                        self._quiet.discard(parent)
                    return
            if parent in self._quiet:
                return
            self._queues["iopub"].put(msg)
        elif channel in ("shell", "control"):
            waiting = self._waiting.pop(parent, None)
            if waiting is not None:
                if not waiting.done():
                    waiting.set_result(msg)
            elif channel == "shell":
                self._queues["shell"].put(msg)
        elif channel == "stdin":
            self._queues["stdin"].put(msg)

    def stop_channels(self) -> None:
        self.closed = True
        self.connected.clear()
        for task in (self._reader, self._writer):
            if task is not None:
                task.cancel()
        for waiting in self._waiting.values():
            waiting.cancel()
        if self._ws is not None:
            closing = asyncio.ensure_future(self._ws.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            self._ws = None

    # -- messages ----------------------------------------------------------------------

    def _send(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        msg = {
            "header": {
                "msg_id": msg_id,
                "msg_type": msg_type,
                "username": "runfix",
                "session": self.session,
                "date": datetime.now(timezone.utc).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        self._outbox.put_nowait(json.dumps(msg))
        return msg_id

    def execute(
        self,
        code: str,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
    ) -> str:
        content = _execute(code, silent, store_history, user_expressions, allow_stdin)
        return self._send("execute_request", content)

    def send(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send a shell message that has no reply to wait for (a comm's); its id."""
        return self._send(msg_type, content)

    def input(self, value: str) -> None:
        self._send("input_reply", {"value": value}, "stdin")

    async def _reply(self, msg_type: str, content: dict[str, Any], timeout: float) -> Any:
        """Send a request and wait for its reply, dropping what it says on iopub."""
        loop = asyncio.get_running_loop()
        msg_id = self._send(msg_type, content)
        waiting: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._waiting[msg_id] = waiting
        self._quiet.add(msg_id)
        try:
            return await asyncio.wait_for(waiting, timeout)
        except BaseException:
            self._quiet.discard(msg_id)  # its idle may never come
            raise
        finally:
            self._waiting.pop(msg_id, None)

    async def control(self, msg_type: str, content: dict[str, Any], timeout: float) -> Any:
        """A control request's reply (answered while a cell runs: the debugger's)."""
        msg_id = self._send(msg_type, content, "control")
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = waiting
        try:
            return await asyncio.wait_for(waiting, timeout)
        finally:
            self._waiting.pop(msg_id, None)

    async def execute_interactive(
        self,
        code: str,
        *,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
        timeout: float = 60.0,
    ) -> Any:
        content = _execute(code, silent, store_history, user_expressions, allow_stdin=False)
        try:
            return await self._reply("execute_request", content, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"the kernel did not answer within {timeout:g}s") from None

    async def wait_for_ready(self, timeout: float = 60.0) -> None:
        try:
            await self._reply("kernel_info_request", {}, timeout)
        except asyncio.TimeoutError:
            raise RuntimeError(f"the kernel did not answer within {timeout:g}s") from None

    async def _get(self, name: str, timeout: float | None) -> dict[str, Any]:
        return await self._queues[name].get(timeout)

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("iopub", timeout)

    def iopub_waiting(self) -> dict[str, Any] | None:
        """A message that came on IOPub and waits, taken now; None when none does."""
        return self._queues["iopub"].take()

    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("shell", timeout)

    async def get_stdin_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("stdin", timeout)


class _Box:
    """One channel's messages as they came, waited for with a future and a timer.

    (`asyncio.wait_for(queue.get(), timeout)` made a task and a timer for every message the
    run loop waited for: most of what a remote run cost here beyond the WebSocket.)"""

    def __init__(self) -> None:
        self._items: collections.deque[dict[str, Any]] = collections.deque()
        self._waiters: list[asyncio.Future[None]] = []

    def put(self, msg: dict[str, Any]) -> None:
        self._items.append(msg)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def take(self) -> dict[str, Any] | None:
        """The next message if one came; None if none did."""
        return self._items.popleft() if self._items else None

    async def get(self, timeout: float | None) -> dict[str, Any]:
        """The next message; `queue.Empty` when none came within `timeout` (None: wait)."""
        loop = asyncio.get_running_loop()
        until = None if timeout is None else loop.time() + timeout
        while not self._items:
            left = None if until is None else until - loop.time()
            if left is not None and left <= 0:
                raise queue.Empty
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            timer = None if left is None else loop.call_later(left, _wake, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return self._items.popleft()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _ack_now(sock: Any) -> None:
    """Acknowledge what came at once (Linux: TCP_QUICKACK, which lapses: so, each time).

    A kernel's answer is several small WebSocket frames (busy, the input, the result, the
    reply, idle). A server that writes them without TCP_NODELAY (Jupyter Server's does)
    holds each after the first until it is acknowledged, and a receiver delays its
    acknowledgement up to 40 ms: every run took ~48 ms on loopback, ~12 ms with this."""
    if _QUICKACK is not None and sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


def _execute(
    code: str,
    silent: bool,
    store_history: bool,
    user_expressions: dict[str, str] | None,
    allow_stdin: bool,
) -> dict[str, Any]:
    """An execute_request's content."""
    return {
        "code": code,
        "silent": silent,
        "store_history": store_history,
        "user_expressions": user_expressions or {},
        "allow_stdin": allow_stdin,
        "stop_on_error": True,
    }


def _decode(frame: str | bytes) -> dict[str, Any] | None:
    """A message from a text frame (JSON), or a binary one (JSON and buffers, which runfix
    does not use: a widget's)."""
    try:
        if isinstance(frame, str):
            msg = json.loads(frame)
        else:
            count = struct.unpack("!I", frame[:4])[0]
            offsets = struct.unpack(f"!{count}I", frame[4 : 4 + 4 * count])
            end = offsets[1] if count > 1 else len(frame)
            msg = json.loads(frame[offsets[0] : end])
    except (ValueError, struct.error):
        log.warning("dropped a message from the kernel's WebSocket that is not Jupyter's")
        return None
    return msg if isinstance(msg, dict) else None
