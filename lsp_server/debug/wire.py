"""DAP's wire (a `Content-Length` header, then the JSON body) and what runfix's debug adapter
says before it knows the folder (`initialize`'s answer). Light: `runfix dap` imports it
without the server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

HEADER_LIMIT = 64 * 1024
"""Bytes of headers one message may have (a client that sends more is broken)."""
BODY_LIMIT = 64 * 1024 * 1024
"""Bytes one message's body may have."""

CAPABILITIES: dict[str, Any] = {
    "supportsConfigurationDoneRequest": True,
    "supportsEvaluateForHovers": True,
    "supportsExceptionInfoRequest": True,
    "supportsTerminateRequest": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsClipboardContext": True,
    "exceptionBreakpointFilters": [
        {"filter": "raised", "label": "Raised Exceptions", "default": False},
        {"filter": "uncaught", "label": "Uncaught Exceptions", "default": False},
    ],
}
"""What runfix's debug adapter does (`initialize`'s answer): `runfix dap` says it before the
folder is known."""


class WireError(Exception):
    """The stream is not DAP (no length, too long, not JSON): it cannot be read on."""


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message; None at the stream's end."""
    length: int | None = None
    seen = 0
    while True:
        line = await reader.readline()
        if not line:
            return None
        seen += len(line)
        if seen > HEADER_LIMIT:
            raise WireError("a message's headers were over 64 KiB")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise WireError(f"Content-Length is not a number: {value.strip()!r}") from None
    if length is None or not 0 <= length <= BODY_LIMIT:
        raise WireError("a message without a Content-Length, or one over 64 MiB")
    body = await reader.readexactly(length)
    try:
        message = json.loads(body)
    except ValueError:
        raise WireError("a message's body is not JSON") from None
    if not isinstance(message, dict):
        raise WireError("a message's body is not a JSON object")
    return message


def response(request: dict[str, Any], body: Any = None, error: str | None = None) -> dict[str, Any]:
    """The response to `request` (without its `seq`): `body`, or `error` shown to the user."""
    answer: dict[str, Any] = {
        "type": "response",
        "request_seq": request.get("seq", 0),
        "command": request.get("command", ""),
        "success": error is None,
    }
    if error is not None:
        answer["message"] = error
        answer["body"] = {"error": {"id": 1, "format": error, "showUser": True}}
    elif body is not None:
        answer["body"] = body
    return answer


def framed(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
