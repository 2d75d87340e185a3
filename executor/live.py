"""Questions to a kernel while the user types: completion, hover, signature help.

The kernel side is `_kernel_live` (loaded with the helper), asked over a comm. Where
the kernel has subshells (ipykernel 7, JEP 91) the questions go to a subshell of
their own, on a client of their own, so an answer never waits for a running cell.
Elsewhere (an older ipykernel, a remote kernel) they are asked only while the kernel
is idle, and a busy kernel is answered from the picture of its namespace the last
run left (`from_picture`), marked incomplete so the editor asks again.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import uuid
from dataclasses import dataclass
from typing import Any

from executor import _kernel_live
from executor.kernel_socket import KernelSocket

log = logging.getLogger(__name__)

SUBSHELL_WAIT = 2.0
"""Seconds a kernel has to answer `create_subshell_request` (one without subshells says
so at once, or never answers the control message it does not know)."""


class LiveUnavailable(Exception):
    """The kernel cannot be asked now (no answer in time, channels gone)."""


@dataclass(frozen=True)
class LiveAnswer:
    answer: Any
    """What `_kernel_live` answered (None: nothing known there)."""
    fresh: bool = True
    """False: from the picture the last run left (the kernel was busy), not the kernel."""


class LiveDoor:
    """One kernel's door for questions: a comm to `_runfix_live`, on a client and a subshell
    of its own where the kernel has subshells, else on the run's own client."""

    def __init__(self, kc: Any, *, own: bool) -> None:
        self.kc = kc
        self.own = own
        """A client of its own (jupyter_client): the run's channels are never touched."""
        self.subshell: str | None = None
        self.comm_id = uuid.uuid4().hex
        self.picture: dict[str, Any] | None = None
        """The namespace in brief, as the last run left it (kernels without subshells)."""
        self.closed = False

    @classmethod
    async def open(cls, main: Any) -> LiveDoor:
        """A door beside the run's client `main` (its own client where it can have one)."""
        if isinstance(main, KernelSocket):
            door = cls(main, own=False)
        else:
            import zmq  # (here: the server answers `initialize` before loading kernel libraries)

            side = type(main)()
            side.load_connection_info(main.get_connection_info())
            side.start_channels(hb=False, stdin=False)
            # Only this door's comm is read from iopub: nothing else piles up in its socket.
            sock = side.iopub_channel.socket
            sock.setsockopt(zmq.UNSUBSCRIBE, b"")
            door = cls(side, own=True)
            sock.setsockopt(zmq.SUBSCRIBE, f"comm-{door.comm_id}".encode())
            door.subshell = await _subshell(side)
        door._send("comm_open", {"comm_id": door.comm_id, "target_name": _kernel_live.TARGET})
        return door

    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        if isinstance(self.kc, KernelSocket):
            self.kc.send(msg_type, content)
            return
        msg = self.kc.session.msg(msg_type, content)
        if self.subshell is not None:
            msg["header"]["subshell_id"] = self.subshell
        self.kc.shell_channel.send(msg)

    async def ask(self, op: str, data: dict[str, Any], timeout: float) -> Any:
        """`_kernel_live`'s answer to `op`; LiveUnavailable when none came within `timeout`."""
        if self.closed:
            raise LiveUnavailable("the kernel's channels are closed")
        asked = uuid.uuid4().hex
        self._send("comm_msg", {"comm_id": self.comm_id, "data": {**data, "op": op, "id": asked}})
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while (left := until - loop.time()) > 0:
            try:
                msg = await self.kc.get_iopub_msg(timeout=left)
            except queue.Empty:
                break
            content = msg.get("content") or {}
            if msg.get("msg_type") != "comm_msg" or content.get("comm_id") != self.comm_id:
                continue
            said = content.get("data") or {}
            if said.get("id") != asked:
                continue  # an answer that came too late for an earlier question
            if "error" in said:  # an abandoned answer left a thread in the kernel: said so
                level = logging.WARNING if said.get("abandoned") else logging.INFO
                log.log(level, "the kernel could not answer %s: %s", op, said["error"])
                return None
            return said.get("answer")
        raise LiveUnavailable(f"the kernel did not answer within {timeout * 1000:.0f} ms")

    def close(self) -> None:
        self.closed = True
        if self.own:
            self.kc.stop_channels()


async def _control(kc: Any, msg_type: str) -> dict[str, Any] | None:
    """The reply's content to a control request (answered even while a cell runs); None when
    none came within SUBSHELL_WAIT."""
    msg = kc.session.msg(msg_type, {})
    kc.control_channel.send(msg)
    loop = asyncio.get_running_loop()
    until = loop.time() + SUBSHELL_WAIT
    while (left := until - loop.time()) > 0:
        try:
            reply = await kc.get_control_msg(timeout=left)
        except queue.Empty:
            return None
        if reply.get("parent_header", {}).get("msg_id") == msg["header"]["msg_id"]:
            content: dict[str, Any] = reply.get("content") or {}
            return content
    return None


async def _subshell(kc: Any) -> str | None:
    """A new subshell's id, or None when the kernel has none (ipykernel before 7 says so in
    its `kernel_info`, JEP 91's `supported_features`)."""
    info = await _control(kc, "kernel_info_request")
    if info is None or "kernel subshells" not in (info.get("supported_features") or ()):
        return None
    made = await _control(kc, "create_subshell_request")
    if made is not None and made.get("status") == "ok" and made.get("subshell_id"):
        return str(made["subshell_id"])
    return None


def from_picture(picture: dict[str, Any] | None, op: str, data: dict[str, Any]) -> Any:
    """What can be said from the picture alone: a name's keys or attributes, the names."""
    names: dict[str, Any] = (picture or {}).get("names") or {}
    if not names:
        return None
    if op == "describe":
        entry = names.get(str(data.get("expression", "")))
        if entry is None:
            return None
        return {"expression": data["expression"], "type": entry.get("type", "")}
    if op != "complete":
        return None
    before = str(data.get("before", ""))
    key = _kernel_live._KEY.search(before)
    if key is not None:
        entry = names.get(key.group(1))
        prefix, quote = key.group(3), key.group(2)
        keys = [(k, d) for k, d in (entry or {}).get("keys", ()) if k.startswith(prefix)]
        items = [{"label": k, "kind": "key", "detail": d, "quote": quote} for k, d in keys]
        return {"what": "key", "prefix": prefix, "items": items} if entry else None
    attr = _kernel_live._ATTR.search(before)
    if attr is not None:
        entry = names.get(attr.group(1))
        if entry is None:
            return None
        prefix = attr.group(2)
        attributes = (entry.get("attributes") or {}).items()
        items = [
            {"label": n, "kind": "attribute", "detail": t}
            for n, t in attributes
            if n.startswith(prefix) and (not n.startswith("_") or prefix.startswith("_"))
        ]
        return {"what": "attribute", "prefix": prefix, "items": items}
    bare = _kernel_live._BARE.search(before)
    if bare is None:
        return None
    prefix, bound = bare.group(1), set(data.get("bound", ()))
    items = [
        {"label": n, "kind": "name", "detail": e.get("type", "")}
        for n, e in names.items()
        if n.startswith(prefix) and n not in bound
    ]
    return {"what": "name", "prefix": prefix, "items": items}
