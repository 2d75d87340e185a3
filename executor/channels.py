"""jupyter_client's async kernel client, reading messages with less in the way: a run reads
three or more messages per request (busy, the reply, idle, what it printed), and on a
kernel that answers in a millisecond jupyter_client's own reading of each was a good part
of what runfix added to the kernel's round trip.

- A request is written at once, and a message already waiting is taken at once
  (non-blocking writes and reads on the socket), without the futures the async socket
  makes for each; only when none is there does the channel wait for one within the
  timeout — on the async socket's read, without the poller jupyter_client puts before it
  (a future, a watcher and a turn of the loop more).
- A message is checked as jupyter_client checks it (its HMAC signature, no replay of a
  signature seen, the protocol's version adapted) and decoded without turning the headers'
  `date` fields into datetimes: runfix reads no message's date.
"""

from __future__ import annotations

import hmac
from queue import Empty
from typing import Any, cast

import zmq
import zmq.asyncio
from jupyter_client.adapter import adapt
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session
from traitlets import Type


def decode(session: Session, frames: list[bytes]) -> dict[str, Any]:
    """A message's frames (identities first) as jupyter_client's message dict; ValueError
    for one not signed with the connection's key, or a signature seen before."""
    _, found = session.feed_identities(frames)
    parts = cast("list[bytes]", found)  # (copied frames: bytes)
    if len(parts) < 5:
        raise TypeError(f"a malformed message: {len(parts)} parts, at least 5 wanted")
    signature = parts[0]
    if session.auth is not None:
        if not signature:
            raise ValueError("an unsigned message")
        if signature in session.digest_history:
            raise ValueError(f"a signature seen before: {signature!r}")
        session._add_digest(signature)  # (jupyter_client's own replay guard)
        if not hmac.compare_digest(signature, session.sign(parts[1:5])):
            raise ValueError(f"an invalid signature: {signature!r}")
    header = session.unpack(parts[1])
    message = {
        "header": header,
        "msg_id": header["msg_id"],
        "msg_type": header["msg_type"],
        "parent_header": session.unpack(parts[2]),
        "metadata": session.unpack(parts[3]),
        "content": session.unpack(parts[4]),
        "buffers": [memoryview(b) for b in parts[5:]],
    }
    return adapt(message)


class QuickChannel(AsyncZMQSocketChannel):
    """A shell or IOPub channel that takes a waiting message at once (see the module)."""

    _plain: zmq.Socket[bytes] | None = None

    @property
    def _now(self) -> zmq.Socket[bytes]:
        """The same ZeroMQ socket, read and written without asyncio (a plain read is tried
        only while no async read of the channel waits: one reader at a time)."""
        if self._plain is None:
            assert self.socket is not None
            self._plain = zmq.Socket.shadow(self.socket.underlying)
        return self._plain

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:  # type: ignore[override]
        try:
            frames = self._now.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            if timeout is not None and timeout <= 0:
                raise Empty from None
            assert self.socket is not None
            # The async socket's own read, bounded by the socket's receive timeout (pyzmq
            # times an async read by it): one future, resolved when the message comes.
            # The timeout is given back after the read: pyzmq times every async wait on the
            # socket by it, jupyter_client's poller too, which then raised `zmq.Again` when
            # the kernel was slower than the last timed read (the helper's load at a start
            # on a busy machine, after `wait_for_ready`'s 0.2 s read of IOPub).
            self._now.rcvtimeo = -1 if timeout is None else max(1, int(timeout * 1000))
            try:
                frames = await self.socket.recv_multipart()
            except zmq.Again:
                raise Empty from None
            finally:
                if timeout is not None:
                    self._now.rcvtimeo = -1
        return decode(self.session, frames)

    def get_now(self) -> dict[str, Any] | None:
        """A message already waiting, taken now; None when none is (no async read of the
        channel may be waiting: one reader at a time)."""
        try:
            frames = self._now.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return None
        return decode(self.session, frames)

    def send(self, msg: dict[str, Any]) -> None:
        """Sent at once, without the future the async socket makes for every write (a
        full queue — the kernel gone for a thousand messages — waits as jupyter_client's)."""
        try:
            self._now.send_multipart(self.session.serialize(msg), zmq.NOBLOCK)
        except zmq.Again:
            super().send(msg)

    def close(self) -> None:
        self._plain = None
        super().close()


class QuickClient(AsyncKernelClient):
    """jupyter_client's async client with `QuickChannel` for shell and IOPub."""

    shell_channel_class = Type(QuickChannel)
    iopub_channel_class = Type(QuickChannel)

    def iopub_waiting(self) -> dict[str, Any] | None:
        """A message waiting on IOPub, taken now; None when none is (`QuickChannel.get_now`)."""
        return cast(QuickChannel, self.iopub_channel).get_now()
