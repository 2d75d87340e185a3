"""Commands: runs, the model's commands (generate, run and fix, fix with model), install,
and kernel control (interrupt, restart, variables, clear results).

Arguments are validated here; a malformed call is a JSON-RPC error that says
what was expected, never a crash.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, cast

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from executor import install as installer
from lsp_server import assist
from lsp_server.cells import cell_at, split_cells
from lsp_server.runs import parse_run_arguments, run_document
from lsp_server.server import RunfixServer, status_of

RUN = "runfix.run"
GENERATE = "runfix.generate"
RUN_AND_FIX = "runfix.runAndFix"
FIX_WITH_MODEL = "runfix.fixWithModel"
INSTALL = "runfix.install"
INTERRUPT = "runfix.interrupt"
RESTART = "runfix.restart"
VARIABLES = "runfix.variables"
CLEAR = "runfix.clear"
STATUS = "runfix.status"


def _uri_argument(args: tuple[Any, ...]) -> str | None:
    if not args:
        return None
    if isinstance(args[0], dict) and isinstance(args[0].get("uri"), str):
        return str(args[0]["uri"])
    raise JsonRpcInvalidParams('expected [{"uri": <document uri>}] or no arguments')


async def _cancellable(
    ls: RunfixServer, work: Callable[[asyncio.Event], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Run `work` with an event that `$/cancelRequest` for this request sets."""
    cancel = asyncio.Event()
    msg_id = ls.protocol.msg_id
    if msg_id is not None:
        ls.protocol.run_cancels[msg_id] = cancel
    try:
        return await work(cancel)
    finally:
        if msg_id is not None:
            ls.protocol.run_cancels.pop(msg_id, None)


def _object(ls: RunfixServer, command: str, args: tuple[Any, ...], shape: str) -> dict[str, Any]:
    if len(args) != 1 or not isinstance(args[0], dict) or not isinstance(args[0].get("uri"), str):
        raise JsonRpcInvalidParams(f"{command}: expected one argument: {shape}")
    _must_be_open(ls, command, args[0]["uri"])
    return args[0]


def _must_be_open(ls: RunfixServer, command: str, uri: str) -> None:
    """Commands act on the editor's text, never on a file the editor has not opened."""
    if uri not in ls.workspace.text_documents:
        raise JsonRpcInvalidParams(f"{command}: {uri} is not open in the editor")


def _line(value: Any) -> int:
    if not isinstance(value, dict) or isinstance(value.get("line"), bool):
        raise ValueError
    line = value.get("line")
    if not isinstance(line, int) or line < 0:
        raise ValueError
    return line


RangeWork = Callable[
    [RunfixServer, str, lsp.Range | None, asyncio.Event], Awaitable[dict[str, Any]]
]


def _range_command(server: RunfixServer, name: str, work: RangeWork) -> None:
    """A cancellable command taking `[{"uri": …, "range": <optional>}]`, or
    `[{"uri": …, "position": <Position>}]` for the cell holding that position."""

    @server.command(name)
    async def command(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        try:
            uri, line_range = parse_run_arguments(args)
            _must_be_open(ls, name, uri)
            if line_range is None and args[0].get("position") is not None:
                line_range = _cell_range(ls, uri, _line(args[0]["position"]))
        except ValueError as exc:
            why = str(exc) or '"position" must be an LSP Position'
            raise JsonRpcInvalidParams(f"{name}: {why}") from None
        size = len(ls.workspace.text_documents[uri].lines)
        if line_range is not None and line_range.start.line > size:
            raise JsonRpcInvalidParams(
                f"{name}: the range starts at line {line_range.start.line}, past the end of "
                f"the document ({size} lines)"
            )
        return await _cancellable(ls, lambda cancel: work(ls, uri, line_range, cancel))


def _cell_range(ls: RunfixServer, uri: str, line: int) -> lsp.Range:
    """The code lines of the cell holding `line` (a marker line belongs to its cell)."""
    lines = ls.workspace.get_text_document(uri).lines
    markers = ls.cached_settings(ls.folder_for(uri)).prompt_markers
    cell = cell_at(split_cells(lines, markers), min(line, max(len(lines) - 1, 0)))
    if cell is None or cell.code_first > cell.last:
        return lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0))
    return lsp.Range(lsp.Position(cell.code_first, 0), lsp.Position(cell.last + 1, 0))


def register(server: RunfixServer) -> None:
    _range_command(server, RUN, run_document)
    _range_command(server, RUN_AND_FIX, assist.run_and_fix)

    @server.command(GENERATE)
    async def generate(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        shape = '{"uri": <document uri>, "position": <Position on the prompt line>, "run": <bool>}'
        arg = _object(ls, GENERATE, args, shape)
        try:
            line = _line(arg.get("position"))
        except ValueError:
            raise JsonRpcInvalidParams(f"{GENERATE}: expected {shape}") from None
        run_too = arg.get("run", False)
        if not isinstance(run_too, bool):
            raise JsonRpcInvalidParams(f'{GENERATE}: "run" must be true or false')
        uri = arg["uri"]
        return await _cancellable(ls, lambda c: assist.generate(ls, uri, line, run_too, c))

    @server.command(FIX_WITH_MODEL)
    async def fix_with_model(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        shape = '{"uri": <document uri>, "piece": [first line, last line], "message": <error>}'
        arg = _object(ls, FIX_WITH_MODEL, args, shape)
        piece, message = arg.get("piece"), arg.get("message")
        if not (_is_piece(piece) and isinstance(message, str)):
            raise JsonRpcInvalidParams(f"{FIX_WITH_MODEL}: expected {shape}")
        uri = arg["uri"]
        first, last = cast(list[int], piece)
        doc = ls.workspace.get_text_document(uri)
        error = ls.error_text_for(uri, (first, last), message)

        async def work(cancel: asyncio.Event) -> dict[str, Any]:
            answer = await assist.fix_piece(
                ls, uri, list(doc.lines), first, last, error, cancel, apply=True
            )
            answer.pop("edit", None)
            return answer

        return await _cancellable(ls, work)

    @server.command(INSTALL)
    async def install(ls: RunfixServer, *args: Any) -> dict[str, Any]:
        shape = '{"uri": <document uri>, "packages": [<distribution>], "range": <to re-run>}'
        arg = _object(ls, INSTALL, args, shape)
        packages = arg.get("packages")
        if (
            not isinstance(packages, list)
            or not packages
            or not all(isinstance(p, str) and installer.valid_distribution(p) for p in packages)
        ):
            raise JsonRpcInvalidParams(f"{INSTALL}: expected {shape} with plain package names")
        try:
            uri, rerun = parse_run_arguments([{"uri": arg["uri"], "range": arg.get("range")}])
        except ValueError as exc:
            raise JsonRpcInvalidParams(f"{INSTALL}: {exc}") from None
        return await _cancellable(ls, lambda c: assist.install(ls, uri, packages, rerun, c))

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

    @server.command(STATUS)
    def status(ls: RunfixServer, *args: Any) -> list[dict[str, str]]:
        """Each folder's kernel state and executor (also sent as `runfix/status`)."""
        return [status_of(k.folder, k) for k in ls.kernels.all()]

    @server.command(CLEAR)
    def clear(ls: RunfixServer, *args: Any) -> None:
        uri = _uri_argument(args)
        for target in [uri] if uri else list(ls.workspace.text_documents):
            ls.store.clear(target)
            ls.publish(target)
        ls.refresh_inlay_hints()


def _is_piece(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        and value[0] <= value[1]
    )
