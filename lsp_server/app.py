"""`runfix serve`: the server built with its features, its logging, and how it is served.

Kept apart from `server.py` so that building the server needs no import back
into it from the features (`features/*` import `server`; this imports both).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from lsprotocol import types as lsp
from pygls.io_ import StdoutWriter

from lsp_server.features import register_all
from lsp_server.server import RunfixServer
from lsp_server.transport import MAX_BODY, LineReader, run_frames, stdin_reader

log = logging.getLogger(__name__)


def create_server() -> RunfixServer:
    server = RunfixServer()
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
        self._inside.busy = True
        try:
            kind = next((t for level, t in self._TYPES if record.levelno >= level), None)
            if kind is not None:
                message = self.format(record)
                self.server.window_log_message(lsp.LogMessageParams(type=kind, message=message))
        except Exception:
            pass
        finally:
            self._inside.busy = False


def setup_logging(server: RunfixServer, level: int) -> None:
    logging.basicConfig(
        stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("pygls", "httpx", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    handler = _ClientLogHandler(server)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    for name in ("lsp_server", "executor"):
        logging.getLogger(name).addHandler(handler)


async def _serve(server: RunfixServer, reader: LineReader | None, writer: Any) -> None:
    """Handle the client's messages until `exit` or the end of input; then stop every kernel."""
    server.protocol.set_writer(writer)
    try:
        await run_frames(reader or await stdin_reader(), server.protocol)
    finally:
        await server.close()


def _exit_code(run: Callable[[], None]) -> int:
    """0 after `shutdown` then `exit` (or the end of input), 1 for `exit` without `shutdown`."""
    try:
        run()
    except SystemExit as exc:  # pygls's exit handler: its code is LSP's
        return exc.code if isinstance(exc.code, int) else 1
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


def serve_stdio(server: RunfixServer) -> int:
    """LSP over stdin/stdout; kernels stop when the client says exit or stdin closes."""
    writer = StdoutWriter(sys.stdout.buffer)
    return _exit_code(lambda: asyncio.run(_serve(server, None, writer)))


def serve_tcp(server: RunfixServer, host: str, port: int) -> int:
    """LSP over one TCP connection; the server ends when that client disconnects."""

    async def main() -> None:
        done = asyncio.Event()

        async def connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                await _serve(server, r, w)
            finally:
                done.set()

        listener = await asyncio.start_server(connection, host, port, limit=MAX_BODY)
        log.info("listening on %s:%s", host, port)
        async with listener:
            await done.wait()

    return _exit_code(lambda: asyncio.run(main()))
