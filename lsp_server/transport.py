"""The LSP wire: frames in from the client, each answered as JSON-RPC says.

pygls's own read loop trusts every `Content-Length`: one frame whose length is a
few bytes short (a client counting characters, not bytes, of `héllo`) glues the
rest of its body onto every later header, and the server never answers again.
It also answers malformed JSON and invalid params with silence. This loop
resynchronises on the next valid header (logging what it skipped) and answers
what cannot be handled: -32700 for a body that is not JSON, -32602 for a
request whose params do not fit its method.

Stdin is read with asyncio (no thread hop per line) when it is a pipe or a
socket, as it is under every editor; anything else falls back to a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from typing import Any, BinaryIO, Protocol

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcParseError
from pygls.protocol import JsonRPCProtocol

log = logging.getLogger(__name__)

MAX_BODY = 256 * 1024 * 1024
"""A frame claiming more than this is not believed (a client would not send it)."""
_LINE_LIMIT = MAX_BODY  # a header line may carry a glued-on remnant of a body
_HEADER = re.compile(rb"([A-Za-z][A-Za-z0-9-]*)[ \t]*:[ \t]*([^\r\n]*)\r?\n")
_CONTENT_LENGTH = re.compile(rb"Content-Length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)


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


def handle_frame(protocol: JsonRPCProtocol, body: bytes) -> None:
    """Decode one body and hand it to the protocol; answer what cannot be handled."""
    try:
        message = json.loads(body, object_hook=protocol.structure_message)
    except JsonRpcException as exc:
        _answer_undecodable(protocol, body, exc)
        return
    except ValueError as exc:  # not JSON (or not UTF-8)
        log.warning("a message was not JSON (%s): %r", exc, body[:200])
        send_error(protocol, None, JsonRpcParseError(f"Parse error: {exc}"))
        return
    protocol.handle_message(message)


def _answer_undecodable(protocol: JsonRPCProtocol, body: bytes, exc: JsonRpcException) -> None:
    """JSON, but not a message its method takes: a request gets InvalidParams, with why."""
    raw: Any = json.loads(body)
    msg_id = raw.get("id") if isinstance(raw, dict) else None
    method = raw.get("method") if isinstance(raw, dict) else None
    why = _cause(exc)
    refusal = getattr(protocol, "refusal", None)
    if isinstance(method, str) and refusal is not None:
        refused = refusal(method)
        if refused is not None:  # not initialized, or shut down: that comes first
            if msg_id is not None:
                send_error(protocol, msg_id, refused)
            return
    if msg_id is None or not isinstance(method, str):
        log.warning("dropped a message that does not fit %s: %s", method or "JSON-RPC", why)
        return
    log.warning("invalid params for %s (request %s): %s", method, msg_id, why)
    send_error(protocol, msg_id, JsonRpcInvalidParams(f"Invalid params for {method}: {why}"))


def _cause(exc: BaseException) -> str:
    """The innermost reason a message could not be read, in one line."""
    cause: BaseException = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    nested = getattr(cause, "exceptions", None)
    while nested:
        cause = nested[0]
        nested = getattr(cause, "exceptions", None)
    note = "; ".join(getattr(cause, "__notes__", []) or [])
    text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    return f"{text} ({note})" if note else text


def send_error(protocol: JsonRPCProtocol, msg_id: Any, error: JsonRpcException) -> None:
    """An error response, written by hand: JSON-RPC wants `"id": null` when the id is unknown,
    and lsprotocol's converter leaves a None id out."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": body})


def send_prepared(protocol: JsonRPCProtocol, msg_id: Any, result: str) -> None:
    """A response whose result is JSON text already (`prepared.Prepared`), framed as is."""
    body = f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"result":{result}}}'.encode()
    writer: Any = protocol.writer
    if writer is None:
        log.error("no transport to answer request %s on", msg_id)
        return
    header = b"Content-Length: %d\r\n\r\n" % len(body) if protocol._include_headers else b""
    writer.write(header + body)  # runfix's writers (stdout, a TCP stream) write at once


async def run_frames(reader: LineReader, protocol: JsonRPCProtocol) -> None:
    """Read and handle frames until the input ends."""
    while (body := await read_frame(reader)) is not None:
        try:
            handle_frame(protocol, body)
        except (SystemExit, KeyboardInterrupt):
            raise
        except Exception:  # one bad message must not end the session
            log.exception("a message could not be handled")


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
    stream = stream or sys.stdin.buffer
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    except (ValueError, OSError) as exc:
        log.debug("stdin cannot be read with asyncio (%s): reading on a thread", exc)
        return _ThreadReader(stream)
    return reader
