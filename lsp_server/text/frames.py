"""Frames of the wire LSP and DAP share, read from stdin or a socket (no pygls: `launch`
reads the first frame before the server, and pygls, are imported).

pygls's own read loop trusts every `Content-Length`: one frame whose length is a
few bytes short (a client counting characters, not bytes, of `héllo`) glues the
rest of its body onto every later header, and the server never answers again.
This loop resynchronises on the next valid header, logging what it skipped.

Stdin is read with asyncio (no thread hop per line) when it is a pipe or a
socket, as it is under every editor; anything else falls back to a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from typing import BinaryIO, Protocol

log = logging.getLogger(__name__)

MAX_BODY = 256 * 1024 * 1024
"""A frame claiming more than this is not believed (a client would not send it)."""
_LINE_LIMIT = MAX_BODY  # a header line may carry a glued-on remnant of a body
_HEADER = re.compile(rb"([A-Za-z][A-Za-z0-9-]*)[ \t]*:[ \t]*([^\r\n]*)\r?\n")
_CONTENT_LENGTH = re.compile(rb"Content-Length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)


def framed(body: bytes) -> bytes:
    """A message's body with the header the wire wants."""
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def response_body(msg_id: int | str, result: str) -> bytes:
    """A JSON-RPC response whose result is JSON text already."""
    return f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"result":{result}}}'.encode()


class LineReader(Protocol):
    async def readline(self) -> bytes: ...

    async def readexactly(self, n: int) -> bytes: ...


async def read_frame(reader: LineReader) -> bytes | None:
    """The next frame's body; None at the end of input.

    A line that is not a header is skipped, except that a `Content-Length`
    header glued to its end (the remnant of a body that was longer than its
    frame said) is taken: that is where the next frame starts."""
    length: int | None = None
    while True:
        line = await reader.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if length is None:
                continue  # a blank line outside a header block: nothing to read yet
            try:
                return await reader.readexactly(length)
            except asyncio.IncompleteReadError as exc:
                log.warning("input ended inside a frame (%d of %d bytes)", len(exc.partial), length)
                return None
        if (header := _HEADER.fullmatch(line)) is not None:
            if header.group(1).lower() == b"content-length":
                length = _length(header.group(2))
            continue
        glued = _CONTENT_LENGTH.search(line)
        skipped = line[: glued.start()] if glued else line
        log.warning("skipped %d bytes that were not a frame: %r", len(skipped), skipped[:200])
        length = _length(glued.group(1)) if glued else None


def _length(value: bytes) -> int | None:
    text = value.strip()
    if not text.isdigit() or int(text) > MAX_BODY:
        log.warning("ignored a frame header with Content-Length %r", text[:40])
        return None
    return int(text)


class _ThreadReader:
    """Blocking reads on a thread, for a stdin that asyncio cannot watch (a file, a tty)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    async def readline(self) -> bytes:
        return await asyncio.to_thread(self.stream.readline)

    async def readexactly(self, n: int) -> bytes:
        data = await asyncio.to_thread(self.stream.read, n)
        if len(data) < n:
            raise asyncio.IncompleteReadError(data, n)
        return data


async def stdin_reader(stream: BinaryIO | None = None) -> LineReader:
    """An asyncio reader of stdin if it can be watched (a pipe, a socket), else a thread's."""
    source = stream or sys.stdin.buffer
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    except (ValueError, OSError) as exc:
        log.debug("stdin cannot be read with asyncio (%s): reading on a thread", exc)
        return _ThreadReader(source)
    return reader
