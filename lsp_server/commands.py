"""The one table of commands: for each command of the contract that asks the core to do
something, the argument it takes and the face method that does it. Every door — the LSP
front end, agents' calls (and `runfix mcp` through them), the command line — finds a
command's handler here and calls it through `dispatch`, which wraps what every command
needs: the document's context made once, the cancel event, the editor's redraw at its end,
and the command's time in the log. Adding a command is one row here and one verb.

`runfix.trust`, `runfix.untrust`, `runfix.history`, `runfix.status`, `runfix.clear`,
`runfix.export`, `runfix.outputs` and `runfix.showOutput` are the LSP door's own: they
answer about the editor's workspace folders and views, not a document's run."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from lsp_server import contract
from lsp_server.contract import (
    DocumentArgs,
    FixArgs,
    GenerateArgs,
    InstallArgs,
    Interrupted,
    Range,
    Restarted,
    RunArgs,
    TestsArgs,
)
from lsp_server.flow import Flow
from lsp_server.runs import EVERY_PIECE, RunMode, Where
from lsp_server.services.steps import PieceRun
from lsp_server.text.cells import cell_at, split_cells

log = logging.getLogger(__name__)


@attrs.frozen
class Call:
    """A command's request as a door hands it over."""

    arg: Any = None
    """The command's contract argument (`RunArgs`, …), or None where it takes none."""
    cancel: asyncio.Event = attrs.field(factory=asyncio.Event)
    where: Where | None = None
    """The document's context; made from `arg.uri` by `dispatch` when not given (an agent
    hands one over for a file no editor has open)."""
    mode: RunMode = EVERY_PIECE
    """How a run goes, where the door says more than the contract (the command line's
    `--cell`, an agent's origin)."""
    ran: list[PieceRun] | None = None
    """Each piece's run, collected for a door that reports its outputs itself."""

    @property
    def at(self) -> Where:
        assert self.where is not None, "dispatch makes the context before a handler runs"
        return self.where


Handler = Callable[[Flow, Call], Awaitable[Any]]


@attrs.frozen
class Row:
    """One command: its argument's type, and its handler (a face method, given the call)."""

    args: type | None
    handler: Handler
    document: bool = True
    """The argument names a document whose context the handler needs."""
    settles: bool = False
    """The editor redraws what documents show once it ends (`Flow.done`)."""


def run_range(where: Where, arg: RunArgs) -> Range | None:
    """What a run covers: the range, else the code lines of the cell holding the position
    (a marker line belongs to its cell), else (None) everything."""
    if arg.range is not None or arg.position is None:
        return arg.range
    lines = where.text.lines
    line = arg.position.line
    at = min(line, max(len(lines) - 1, 0))
    cell = cell_at(split_cells(lines, where.settings.prompt_markers), at)
    if cell is None or cell.code_first > cell.last:
        return Range.lines(line, line - 1)
    return Range.lines(cell.code_first, cell.last)


def position_of(arg: RunArgs) -> int:
    """The line a command over the cells around one names (its position, or its range's
    start); `contract.BadArguments` when it names none."""
    at = arg.position or (arg.range.start if arg.range else None)
    if at is None:
        raise contract.BadArguments("expected a position (or a range)")
    return at.line


def _cells(which: str) -> Row:
    """A command over the cells around the one at a position (`Flow.run_cells`)."""

    async def handler(flow: Flow, call: Call) -> Any:
        return await flow.run_cells(call.at, position_of(call.arg), which, call.cancel)

    return Row(RunArgs, handler)


async def _run(flow: Flow, call: Call) -> Any:
    line_range = run_range(call.at, call.arg)
    return await flow.run(call.at, line_range, call.cancel, call.mode, call.ran)


async def _run_and_fix(flow: Flow, call: Call) -> Any:
    return await flow.run_and_fix(call.at, run_range(call.at, call.arg), call.cancel, call.ran)


async def _generate(flow: Flow, call: Call) -> Any:
    arg: GenerateArgs = call.arg
    return await flow.generate(call.at, arg.position.line, arg.run, call.cancel)


async def _fix_with_model(flow: Flow, call: Call) -> Any:
    arg: FixArgs = call.arg
    report = await flow.fix_reported(call.at, arg.piece, arg.message, call.cancel, apply=True)
    return report.answer


async def _install(flow: Flow, call: Call) -> Any:
    arg: InstallArgs = call.arg
    return await flow.install(call.at, arg.packages, arg.range, call.cancel, arg.ask)


def _line(arg: TestsArgs) -> int | None:
    return arg.position.line if arg.position is not None else None


async def _run_tests(flow: Flow, call: Call) -> Any:
    return await flow.run_tests(call.at, _line(call.arg), call.cancel)


async def _fix_tests(flow: Flow, call: Call) -> Any:
    return await flow.fix_tests(call.at, _line(call.arg), call.cancel)


async def _variables(flow: Flow, call: Call) -> Any:
    return await flow.variables(call.at)


async def _interrupt(flow: Flow, call: Call) -> Any:
    return Interrupted(await flow.interrupt(call.arg.uri if call.arg else None))


async def _restart(flow: Flow, call: Call) -> Any:
    return Restarted(await flow.restart(call.arg.uri if call.arg else None))


TABLE: dict[str, Row] = {
    contract.RUN: Row(RunArgs, _run),
    contract.RUN_AND_FIX: Row(RunArgs, _run_and_fix),
    contract.RUN_ABOVE: _cells("above"),
    contract.RUN_BELOW: _cells("below"),
    contract.RUN_DEPENDENTS: _cells("dependents"),
    contract.RESTART_AND_RUN_TO: _cells("to"),
    contract.GENERATE: Row(GenerateArgs, _generate),
    contract.FIX_WITH_MODEL: Row(FixArgs, _fix_with_model),
    contract.INSTALL: Row(InstallArgs, _install),
    contract.RUN_TESTS: Row(TestsArgs, _run_tests, settles=True),
    contract.FIX_TESTS: Row(TestsArgs, _fix_tests, settles=True),
    contract.VARIABLES: Row(DocumentArgs, _variables),
    contract.INTERRUPT: Row(DocumentArgs, _interrupt, document=False),
    contract.RESTART: Row(DocumentArgs, _restart, document=False),
}
"""Each command a door may hand the core, and what does it."""


async def dispatch(flow: Flow, name: str, call: Call, table: dict[str, Row] = TABLE) -> Any:
    """Command `name`'s answer to `call` (its argument already of the row's type): the
    document's context made once, the handler run, the editor's redraw where the row asks
    for one, and the command's time in the log."""
    row = table[name]
    began = time.perf_counter()
    if row.document and call.where is None and call.arg is not None:
        call = attrs.evolve(call, where=await flow.where(call.arg.uri))
    try:
        return await row.handler(flow, call)
    finally:
        if row.settles:
            flow.done()
        log.debug("%s took %.1f ms", name, (time.perf_counter() - began) * 1000)
