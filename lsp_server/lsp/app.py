"""`runfix serve`: the server built with its features, its logging, and its message loop
(`launch` starts it on stdio or TCP).

Kept apart from `server.py` so that building the server needs no import back
into it from the features (`features/*` import `server`; this imports both).
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable
from typing import Any

from lsprotocol import types as lsp

from executor.pool import KernelPool
from lsp_server.lsp.features import register_all
from lsp_server.lsp.server import RunfixServer
from lsp_server.lsp.transport import handle_frame, run_frames
from lsp_server.text.frames import LineReader

log = logging.getLogger(__name__)


def create_server(kernels: KernelPool | None = None) -> RunfixServer:
    server = RunfixServer(kernels)
    register_all(server)
    return server


class _ClientLogHandler(logging.Handler):
    """Python logging → `window/logMessage`, once the client is there."""

    _TYPES = (
        (logging.ERROR, lsp.MessageType.Error),
        (logging.WARNING, lsp.MessageType.Warning),
        (logging.INFO, lsp.MessageType.Info),
    )

    def __init__(self, server: RunfixServer) -> None:
        super().__init__(logging.INFO)
        self.server = server
        self._inside = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._inside, "busy", False) or self.server.protocol.writer is None:
            return
        if getattr(record, "shown", False):
            return  # the client showed it already (`window/showMessage`)
        self._inside.busy = True
        try:
            kind = next((t for level, t in self._TYPES if record.levelno >= level), None)
            if kind is not None:
                message = self.format(record)
                self.server.window_log_message(lsp.LogMessageParams(type=kind, message=message))
                record.sent_to_client = True  # (`launch`: not written to stderr again)
        except Exception:
            pass
        finally:
            self._inside.busy = False


def log_to_client(server: RunfixServer, *filters: Callable[[logging.LogRecord], bool]) -> None:
    """Every log line from INFO up goes to the client (`window/logMessage`) at its own level:
    runfix's and its libraries' (pygls, jupyter_client), each filter saying yes. On stderr,
    which editors file as errors, only what came before the client was there."""
    handler = _ClientLogHandler(server)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    for kept in filters:
        handler.addFilter(kept)
    root = logging.getLogger()
    root.handlers.insert(0, handler)  # before stderr's, which skips what the client got


async def serve_frames(
    server: RunfixServer, reader: LineReader, writer: Any, first: bytes | None = None
) -> None:
    """Handle the client's messages (`first` read already) until `exit` or the end of
    input; then stop every kernel."""
    server.protocol.set_writer(writer)
    # What start-up made (lsprotocol's ~600 classes, pygls, the handlers) lives as long as
    # the server: kept out of the collector's generations, a full collection skips it.
    gc.freeze()
    try:
        if first is not None:
            handle_frame(server.protocol, first)
        await run_frames(reader, server.protocol)
    finally:
        await server.close()
