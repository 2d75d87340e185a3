"""Commands: runs, the model's commands (generate, run and fix, fix with model), install,
and kernel control (interrupt, restart, variables, status, clear results).

Each command's argument is a type of `contract`, converted strictly; a malformed
one is an InvalidParams error naming the command and the field, never a popup.
Long commands are cancellable by `$/cancelRequest` and by their progress.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
from pygls.exceptions import JsonRpcInvalidParams

from executor import install as installer
from lsp_server.contract import (
    CLEAR,
    FIX_TESTS,
    FIX_WITH_MODEL,
    GENERATE,
    INSTALL,
    INTERRUPT,
    RESTART,
    RESTART_AND_RUN_TO,
    RUN,
    RUN_ABOVE,
    RUN_AND_FIX,
    RUN_BELOW,
    RUN_DEPENDENTS,
    RUN_TESTS,
    STATUS,
    VARIABLES,
    BadArguments,
    DocumentArgs,
    FixArgs,
    GenerateArgs,
    InstallArgs,
    Interrupted,
    Range,
    Restarted,
    RunArgs,
    Status,
    TestsArgs,
    one_argument,
    optional_argument,
    to_json,
)
from lsp_server.flow import Flow
from lsp_server.lsp.editor import kernel_status
from lsp_server.lsp.prepared import Prepared
from lsp_server.lsp.server import RunfixServer
from lsp_server.runs import Where
from lsp_server.text.cells import cell_at, split_cells

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


def _cell_range(ls: RunfixServer, uri: str, line: int) -> Range:
    """The code lines of the cell holding `line` (a marker line belongs to its cell)."""
    lines = ls.workspace.get_text_document(uri).lines
    markers = ls.flow.display_settings(ls.editor.folder_for(uri)).prompt_markers
    cell = cell_at(split_cells(lines, markers), min(line, max(len(lines) - 1, 0)))
    if cell is None or cell.code_first > cell.last:
        return Range.lines(line, line - 1)
    return Range.lines(cell.code_first, cell.last)


def _run_range(ls: RunfixServer, name: str, arg: RunArgs) -> Range | None:
    """What a run covers: the range, else the cell holding the position, else everything."""
    line_range = arg.range
    if line_range is None and arg.position is not None:
        _within(ls, name, arg.uri, Range(arg.position, arg.position))  # not the last cell
        line_range = _cell_range(ls, arg.uri, arg.position.line)
    _within(ls, name, arg.uri, line_range)
    return line_range


def _kernel_of(ls: RunfixServer, name: str, args: Sequence[Any]) -> tuple[Path | None, str]:
    """The folder and language of the argument's document (no argument: every kernel)."""
    arg = _document(name, args)
    if arg is None:
        return None, ""
    language = ls.editor.language_of(arg.uri)
    return ls.editor.folder_for(arg.uri), language.id if language else ""


RangeWork = Callable[[Flow, Where, Range | None, asyncio.Event], Awaitable[Any]]


def _range_command(server: RunfixServer, name: str, work: RangeWork) -> None:
    """A command over a document's range (`RunArgs`), cancellable, answered as JSON."""

    @server.command(name)
    async def handler(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, name, args, RunArgs)
        line_range = _run_range(ls, name, arg)
        where = await ls.flow.where(arg.uri)
        answer = await _cancellable(ls, lambda c: work(ls.flow, where, line_range, c))
        return answered(answer)


def _cells_command(server: RunfixServer, name: str, which: str) -> None:
    """A command over the cells around the one at a position (`Flow.run_cells`)."""

    @server.command(name)
    async def handler(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, name, args, RunArgs)
        at = arg.position or (arg.range.start if arg.range else None)
        if at is None:
            raise JsonRpcInvalidParams(f"{name}: expected a position (or a range)")
        _within(ls, name, arg.uri, Range(at, at))
        where = await ls.flow.where(arg.uri)
        answer = await _cancellable(ls, lambda c: ls.flow.run_cells(where, at.line, which, c))
        return answered(answer)


TestsWork = Callable[[Flow, Where, int | None, asyncio.Event], Awaitable[Any]]


def _tests_command(server: RunfixServer, name: str, work: TestsWork) -> None:
    """A command over the project's tests (`TestsArgs`), cancellable, answered as JSON."""

    @server.command(name)
    async def handler(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, name, args, TestsArgs)
        line = arg.position.line if arg.position is not None else None
        where = await ls.flow.where(arg.uri)
        answer = await _cancellable(ls, lambda c: work(ls.flow, where, line, c))
        ls.flow.done()
        return answered(answer)


def register(server: RunfixServer) -> None:
    _range_command(server, RUN, Flow.run)
    _range_command(server, RUN_AND_FIX, Flow.run_and_fix)
    for name, which in (
        (RUN_ABOVE, "above"),
        (RUN_BELOW, "below"),
        (RUN_DEPENDENTS, "dependents"),
        (RESTART_AND_RUN_TO, "to"),
    ):
        _cells_command(server, name, which)

    _tests_command(server, RUN_TESTS, Flow.run_tests)
    _tests_command(server, FIX_TESTS, Flow.fix_tests)

    @server.command(GENERATE)
    async def generate(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, GENERATE, args, GenerateArgs)
        line = arg.position.line
        where = await ls.flow.where(arg.uri)
        answer = await _cancellable(ls, lambda c: ls.flow.generate(where, line, arg.run, c))
        return to_json(answer)

    @server.command(FIX_WITH_MODEL)
    async def fix_with_model(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, FIX_WITH_MODEL, args, FixArgs)
        where = await ls.flow.where(arg.uri)
        report = await _cancellable(
            ls, lambda c: ls.flow.fix_reported(where, arg.piece, arg.message, c, apply=True)
        )
        return to_json(report.answer)

    @server.command(INSTALL)
    async def install(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, INSTALL, args, InstallArgs)
        if not all(installer.valid_distribution(p) for p in arg.packages):
            raise JsonRpcInvalidParams(f"{INSTALL}: packages must be plain distribution names")
        _within(ls, INSTALL, arg.uri, arg.range)
        where = await ls.flow.where(arg.uri)
        answer = await _cancellable(
            ls, lambda c: ls.flow.install(where, arg.packages, arg.range, c, arg.ask)
        )
        return to_json(answer)

    @server.command(INTERRUPT)
    async def interrupt(ls: RunfixServer, *args: Any) -> Any:
        return to_json(Interrupted(await ls.flow.interrupt(*_kernel_of(ls, INTERRUPT, args))))

    @server.command(RESTART)
    async def restart(ls: RunfixServer, *args: Any) -> Any:
        return to_json(Restarted(await ls.flow.restart(*_kernel_of(ls, RESTART, args))))

    @server.command(VARIABLES)
    async def variables(ls: RunfixServer, *args: Any) -> list[dict[str, Any]]:
        arg = _document(VARIABLES, args)
        if arg is None:
            raise JsonRpcInvalidParams(
                f'{VARIABLES}: expected one argument: {{"uri": <document uri>}}'
            )
        variables = await ls.flow.variables(await ls.flow.where(arg.uri))
        return [dataclasses.asdict(v) for v in variables]

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
