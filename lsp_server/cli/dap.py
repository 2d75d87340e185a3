"""`runfix dap`: a debug adapter on stdio for any DAP client (nvim-dap's and dape's
`executable` adapters, dap-mode, VS Code's extension), debugging in the kernel the editor's
`runfix serve` holds for the file's folder, never a kernel of its own.

It answers `initialize` itself (the folder is not known before `launch` names the file),
then reaches the editor's server through the folder's private socket (the one agents use)
and passes DAP messages both ways as JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsp_server.debug.wire import CAPABILITIES, WireError, framed, read_message, response
from lsp_server.folder_socket import DAP_HELLO, STAND_BY, AgentError, connect, held_folder
from lsp_server.text.frames import LineReader, stdin_reader


class _Stdio:
    """The DAP client's side: framed messages on stdin and stdout."""

    def __init__(self, reader: LineReader) -> None:
        self.reader = reader
        self.seq = 0

    def send(self, message: dict[str, Any]) -> None:
        self.seq += 1
        sys.stdout.buffer.write(framed({**message, "seq": message.get("seq") or self.seq}))
        sys.stdout.buffer.flush()

    def respond(self, request: dict[str, Any], body: Any = None, error: str | None = None) -> None:
        self.send(response(request, body, error))


def _uri(program: str) -> bool:
    """`program` is a URI (`file:`, a notebook cell's), not a path."""
    scheme, colon, _ = program.partition(":")
    return bool(colon) and "/" not in scheme and len(scheme) > 1  # (not a Windows drive)


def _program(arguments: dict[str, Any]) -> Path | None:
    """The file `program` names (a path, a `file:` URI, a notebook cell's URI: its
    notebook's path), made absolute against `cwd`."""
    program = arguments.get("program")
    if not isinstance(program, str) or not program:
        return None
    if _uri(program):
        program = unquote(urlparse(program).path)
    cwd = arguments.get("cwd")
    base = cwd if isinstance(cwd, str) and cwd else os.getcwd()
    return Path(os.path.abspath(os.path.join(base, program)))


CONNECT_WAIT = 3 * STAND_BY
"""Seconds `runfix dap` waits for the editor's server to listen on the folder's socket (it
may be starting, or taking the socket over from one that went: it looks every `STAND_BY`
seconds, slower on a loaded machine)."""


async def _connect(folder: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """`agents.connect`, again while nobody listens yet, for up to `CONNECT_WAIT` seconds."""
    deadline = asyncio.get_running_loop().time() + CONNECT_WAIT
    while True:
        try:
            return await connect(folder)
        except (ConnectionRefusedError, FileNotFoundError):
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0.1)


async def _adapter() -> int:
    client = _Stdio(await stdin_reader())
    try:
        # Up to `launch` (or `attach`): answered here, the folder unknown yet.
        while True:
            request = await read_message(client.reader)
            if request is None:
                return 0
            command = request.get("command")
            if command == "initialize":
                client.respond(request, CAPABILITIES)
            elif command in ("launch", "attach"):
                break
            elif command == "disconnect":
                client.respond(request)
                return 0
            else:
                client.respond(request, error=f"{command}: launch first (no file is debugged)")
        arguments = request.get("arguments") or {}
        program = _program(arguments)
        folder = await held_folder(program) if program is not None else None
        if program is None or folder is None:
            why = (
                "program: the file whose cell to debug is needed"
                if program is None
                else f"no editor's runfix holds {program.parent}: open its folder in your "
                "editor (runfix debugs in the editor's kernel, never a second one)"
            )
            client.respond(request, error=why)
            client.send({"type": "event", "event": "terminated"})
            return 1
        try:
            reader, writer = await _connect(folder)
        except (OSError, AgentError) as exc:
            why = f"the editor's runfix for {folder} does not answer: {exc}"
            client.respond(request, error=why)
            client.send({"type": "event", "event": "terminated"})
            return 1
        if not _uri(str(arguments["program"])):  # (a URI goes as it came)
            arguments = {**arguments, "program": str(program)}
        writer.write(DAP_HELLO + b"}\n")
        writer.write(json.dumps({**request, "arguments": arguments}).encode() + b"\n")
        await writer.drain()
        return await _relay(client, reader, writer)
    except WireError as exc:
        print(f"runfix dap: {exc}", file=sys.stderr)
        return 2


async def _relay(client: _Stdio, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Messages both ways until either side ends."""

    async def to_server() -> None:
        while (message := await read_message(client.reader)) is not None:
            writer.write(json.dumps(message).encode() + b"\n")
            await writer.drain()

    async def to_client() -> None:
        while line := await reader.readline():
            with contextlib.suppress(ValueError):
                client.send(json.loads(line))

    up, down = asyncio.ensure_future(to_server()), asyncio.ensure_future(to_client())
    await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    if up.done() and not down.done():
        if writer.can_write_eof():
            writer.write_eof()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(down, 5.0)  # the answers to the last requests
    for task in (up, down):
        task.cancel()
    writer.close()
    return 0


def command(args: argparse.Namespace) -> int:
    return asyncio.run(_adapter())
