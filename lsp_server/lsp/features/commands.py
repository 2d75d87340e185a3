"""Commands: runs, the model's commands (generate, run and fix, fix with model), install,
and kernel control (interrupt, restart, variables, status, clear results).

The commands are the rows of the one table (`lsp_server.commands.TABLE`), each registered
here the same way; status and clear are this door's own. Each command's argument is a type
of `contract`, converted strictly; a malformed
one is an InvalidParams error naming the command and the field, never a popup.
Long commands are cancellable by `$/cancelRequest` and by their progress.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs
from pygls.exceptions import JsonRpcInvalidParams

from executor import install as installer
from lsp_server.commands import TABLE, Call, Row, dispatch
from lsp_server.contract import (
    CLEAR,
    STATUS,
    BadArguments,
    DocumentArgs,
    InstallArgs,
    Range,
    RunArgs,
    Status,
    one_argument,
    optional_argument,
    to_json,
)
from lsp_server.lsp.editor import kernel_status
from lsp_server.lsp.prepared import Prepared
from lsp_server.lsp.server import RunfixServer

T = TypeVar("T")


def argument(ls: RunfixServer, command: str, arguments: Sequence[Any], kind: type[T]) -> T:
    """The command's one argument as `kind`; its document must be open in the editor
    (commands act on the editor's text, never on a file the editor has not opened)."""
    try:
        arg = one_argument(arguments, kind)
    except BadArguments as exc:
        raise JsonRpcInvalidParams(f"{command}: {exc}") from None
    uri = getattr(arg, "uri", None)
    if uri is not None and uri not in ls.workspace.text_documents:
        raise JsonRpcInvalidParams(f"{command}: {uri} is not open in the editor")
    return arg


def optional(command: str, arguments: Sequence[Any], kind: type[T]) -> T | None:
    """The command's argument as `kind`, or None when there is none; InvalidParams naming
    the command and the field when it does not fit."""
    try:
        return optional_argument(arguments, kind)
    except BadArguments as exc:
        raise JsonRpcInvalidParams(f"{command}: {exc}") from None


def _document(command: str, arguments: Sequence[Any]) -> DocumentArgs | None:
    """`[{"uri"}]` (a document, open or not), or no argument."""
    return optional(command, arguments, DocumentArgs)


def _within(ls: RunfixServer, command: str, uri: str, line_range: Range | None) -> None:
    size = len(ls.workspace.text_documents[uri].lines)
    if line_range is not None and line_range.start.line > size:
        raise JsonRpcInvalidParams(
            f"{command}: line {line_range.start.line} is past the end of "
            f"the document ({size} lines)"
        )


async def _cancellable(ls: RunfixServer, work: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """Run `work` with an event that `$/cancelRequest` for this request sets, and so does
    `shutdown` (`RunfixServer.shut_down`): neither cancels the request's task, so the work
    runs in it (no task of its own, no shield: two turns of the loop less per run) and ends
    as a cancelled run does, answering. Only a run still going after the shutdown's grace
    has its task cancelled."""
    cancel = asyncio.Event()
    msg_id = ls.protocol.msg_id
    if msg_id is not None:
        ls.protocol.run_cancels[msg_id] = cancel
    try:
        answer = await work(cancel)
    finally:
        if msg_id is not None:
            ls.protocol.run_cancels.pop(msg_id, None)
    if ls.shutting_down and getattr(answer, "status", None) == Status.CANCELLED:
        answer = attrs.evolve(answer, message="the server is shutting down")  # type: ignore[misc]
    return answer


def answered(answer: Any) -> Prepared:
    """A run's answer (`RunAnswer`, `FixAnswer`: no URI in it) as the JSON text it goes out
    as, written without pygls converting it again."""
    return Prepared.of(to_json(answer))


def _checked(ls: RunfixServer, name: str, row: Row, arguments: Sequence[Any]) -> Any:
    """The command's argument, as its row's type: one a document's commands need (its
    document open, its range and position within it); none or one for a command over the
    kernels, whose document need not be open."""
    if not row.document:
        return optional(name, arguments, row.args) if row.args else None
    if row.args is DocumentArgs:  # (the kernel's variables: the document need not be open)
        arg = optional(name, arguments, DocumentArgs)
        if arg is None:
            raise JsonRpcInvalidParams(f'{name}: expected one argument: {{"uri": <document uri>}}')
        return arg
    arg = argument(ls, name, arguments, row.args or DocumentArgs)
    if isinstance(arg, RunArgs) and arg.position is not None:
        _within(ls, name, arg.uri, Range(arg.position, arg.position))  # not the last cell
    if isinstance(arg, (RunArgs, InstallArgs)):
        _within(ls, name, arg.uri, arg.range)
    if isinstance(arg, InstallArgs) and not all(map(installer.valid_distribution, arg.packages)):
        raise JsonRpcInvalidParams(f"{name}: packages must be plain distribution names")
    return arg


def _wire(answer: Any) -> Any:
    """An answer as it goes out: a run's as JSON text written once (`Prepared`), a list
    (the kernel's variables) item by item."""
    if isinstance(answer, list):
        return [dataclasses.asdict(v) for v in answer]  # (`executor.events.Variable`)
    return answered(answer)


def _command(server: RunfixServer, name: str, row: Row, table: dict[str, Row]) -> None:
    """The table's row as an LSP command: its argument checked, cancellable, dispatched."""

    @server.command(name)
    async def handler(ls: RunfixServer, *args: Any) -> Any:
        arg = _checked(ls, name, row, args)

        async def work(cancel: asyncio.Event) -> Any:
            try:
                return await dispatch(ls.flow, name, Call(arg, cancel), table)
            except BadArguments as exc:
                raise JsonRpcInvalidParams(f"{name}: {exc}") from None

        return _wire(await _cancellable(ls, work))


def register(server: RunfixServer, table: dict[str, Row] = TABLE) -> None:
    """Every command of the table (`lsp_server.commands`), and the door's own."""
    for name, row in table.items():
        _command(server, name, row, table)

    @server.command(STATUS)
    def status(ls: RunfixServer, *args: Any) -> Any:
        """Each folder's kernel state and executor (also sent as `runfix/status`)."""
        return [to_json(kernel_status(k.folder, k)) for k in ls.flow.kernels()]

    @server.command(CLEAR)
    def clear(ls: RunfixServer, *args: Any) -> None:
        arg = _document(CLEAR, args)
        for target in [arg.uri] if arg else ls.editor.open_documents():
            ls.flow.clear(target)
        ls.flow.done()
