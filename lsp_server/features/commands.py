"""Commands: `runfix.run` and kernel control (interrupt, restart, variables, clear results).

Arguments are validated here; a malformed call is a JSON-RPC error that says
what was expected, never a crash.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from lsp_server.runs import parse_run_arguments, run_document
from lsp_server.server import RunfixServer

RUN = "runfix.run"
INTERRUPT = "runfix.interrupt"
RESTART = "runfix.restart"
VARIABLES = "runfix.variables"
CLEAR = "runfix.clear"


def _uri_argument(args: tuple[Any, ...]) -> str | None:
    if not args:
        return None
    if isinstance(args[0], dict) and isinstance(args[0].get("uri"), str):
        return str(args[0]["uri"])
    raise JsonRpcInvalidParams('expected [{"uri": <document uri>}] or no arguments')


def register(server: RunfixServer) -> None:
    @server.command(RUN)
    async def run(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        try:
            uri, line_range = parse_run_arguments(args)
        except ValueError as exc:
            raise JsonRpcInvalidParams(f"{RUN}: {exc}") from None
        cancel = asyncio.Event()
        msg_id = ls.protocol.msg_id
        if msg_id is not None:
            ls.protocol.run_cancels[msg_id] = cancel
        try:
            return await run_document(ls, uri, line_range, cancel)
        finally:
            if msg_id is not None:
                ls.protocol.run_cancels.pop(msg_id, None)

    def _folders(ls: RunfixServer, args: tuple[Any, ...]) -> list[Any]:
        uri = _uri_argument(args)
        if uri is None:
            return ls.kernels.all()
        kernel = ls.kernels.find(ls.folder_for(uri))
        return [kernel] if kernel is not None else []

    @server.command(INTERRUPT)
    async def interrupt(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        kernels = _folders(ls, args)
        await asyncio.gather(*(k.interrupt() for k in kernels))
        return {"interrupted": len(kernels)}

    @server.command(RESTART)
    async def restart(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        kernels = _folders(ls, args)
        await asyncio.gather(*(k.restart() for k in kernels))
        ls.tell("runfix: kernel restarted; its state was cleared.", lsp.MessageType.Info)
        return {"restarted": len(kernels)}

    @server.command(VARIABLES)
    async def variables(ls: RunfixServer, *args: Any) -> list[dict[str, Any]]:
        uri = _uri_argument(args)
        if uri is None:
            raise JsonRpcInvalidParams(f'{VARIABLES}: expected [{{"uri": <document uri>}}]')
        kernel = await ls.kernel_for(ls.folder_for(uri))
        return [dataclasses.asdict(v) for v in await kernel.variables()]

    @server.command(CLEAR)
    def clear(ls: RunfixServer, *args: Any) -> None:
        uri = _uri_argument(args)
        for target in [uri] if uri else list(ls.workspace.text_documents):
            ls.store.clear(target)
            ls.publish(target)
        ls.refresh_inlay_hints()
