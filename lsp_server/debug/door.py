"""A debug session through the folder's socket (`runfix dap` opens it, `AgentDoor` hands it
over): DAP messages as JSON lines both ways, until the client disconnects or hangs up."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from lsp_server.debug.session import DebugSession
from lsp_server.editor import Editor
from lsp_server.flow import Flow

log = logging.getLogger(__name__)


async def serve_debug(
    flow: Flow,
    editor: Editor,
    folder: Path,
    streams: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    debugging: set[Path],
) -> None:
    """One client's session in `folder`, on its connection's `streams`; `debugging`: the
    folders a session is open in. One per folder: a second is refused, saying so."""
    reader, writer = streams

    def send(message: dict[str, Any]) -> None:
        writer.write(json.dumps(message).encode() + b"\n")

    if folder in debugging:
        output = (
            f"runfix: {folder.name} is being debugged already (another session): end that "
            "one first\n"
        )
        send({"type": "event", "event": "output", "seq": 1,
              "body": {"category": "stderr", "output": output}})  # fmt: skip
        send({"type": "event", "event": "terminated", "seq": 2})
        writer.close()
        return
    debugging.add(folder)
    session = DebugSession(flow, editor, folder, send)
    try:
        while not session.ended.is_set():
            line = await reader.readline()
            if not line:
                break
            try:
                message = json.loads(line)
            except ValueError:
                log.info("a debug client sent a line that is not JSON")
                continue
            if isinstance(message, dict):
                await session.handle(message)
                await writer.drain()
    except (ConnectionError, ValueError):
        pass
    finally:
        await session.close()
        debugging.discard(folder)
        writer.close()
