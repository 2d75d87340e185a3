"""The LSP wire: frames (`frames`) from the client, each answered as JSON-RPC says.

pygls answers malformed JSON and invalid params with silence; here what cannot
be handled is answered: -32700 for a body that is not JSON, -32602 for a request
whose params do not fit its method.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcParseError
from pygls.protocol import JsonRPCProtocol

from lsp_server.lsp.uris import ClientUris
from lsp_server.text.frames import LineReader, framed, read_frame, response_body

log = logging.getLogger(__name__)


def handle_frame(protocol: JsonRPCProtocol, body: bytes) -> None:
    """Decode one body and hand it to the protocol; answer what cannot be handled."""
    uris: ClientUris | None = getattr(protocol, "uris", None)
    structure = protocol.structure_message

    def hook(obj: dict[str, Any]) -> Any:
        return structure(uris.incoming(obj) if uris is not None else obj)

    try:
        message = json.loads(body, object_hook=hook)
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
    _write(protocol, response_body(msg_id, result), f"the answer to request {msg_id}")


def send_prepared_notification(protocol: JsonRPCProtocol, method: str, params: str) -> None:
    """A notification whose params are JSON text already, framed as is."""
    body = f'{{"jsonrpc":"2.0","method":{json.dumps(method)},"params":{params}}}'.encode()
    _write(protocol, body, method)


def _write(protocol: JsonRPCProtocol, body: bytes, what: str) -> None:
    writer: Any = protocol.writer
    if writer is None:
        log.error("no transport to send %s on", what)
        return
    # runfix's writers (stdout, a TCP stream) write at once
    writer.write(framed(body) if protocol._include_headers else body)


async def run_frames(reader: LineReader, protocol: JsonRPCProtocol) -> None:
    """Read and handle frames until the input ends."""
    while (body := await read_frame(reader)) is not None:
        try:
            handle_frame(protocol, body)
        except (SystemExit, KeyboardInterrupt):
            raise
        except Exception:  # one bad message must not end the session
            log.exception("a message could not be handled")
