"""DAP's wire — the frames LSP's wire has too (`lsp_server.text.frames`: a `Content-Length`
header, then the body), each body a JSON object — and what runfix's debug adapter says
before it knows the folder (`initialize`'s answer). Light: `runfix dap` imports it without
the server."""

from __future__ import annotations

import json
from typing import Any

from lsp_server.text import frames

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


async def read_message(reader: frames.LineReader) -> dict[str, Any] | None:
    """The next message; None at the stream's end (what is no frame is skipped, as on the
    server's own wire)."""
    body = await frames.read_frame(reader)
    if body is None:
        return None
    if len(body) > BODY_LIMIT:
        raise WireError("a message over 64 MiB")
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
    return frames.framed(json.dumps(message).encode())
