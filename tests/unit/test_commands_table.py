"""Issue 62, 2: one table of commands every door finds its handler in; a new command is one
row of it and one verb."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from executor.trust import Choice
from lsp_server import contract
from lsp_server.commands import TABLE, Call, Row, dispatch, run_range
from lsp_server.contract import DocumentArgs, Position, RunArgs, Status
from lsp_server.flow import Flow
from lsp_server.lsp.features import commands as lsp_commands
from lsp_server.lsp.server import RunfixServer
from lsp_server.runs import Where
from lsp_server.services.desk import Desk
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.text.cells import split_cells
from tests.support.editors import URI, FakeEditor

COUNT_CELLS = "runfix.countCells"


class CellCount:
    """The new verb: how many cells a document has, as its folder's settings split them."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def count(self, where: Where) -> int:
        return len(split_cells(where.text.lines, where.settings.prompt_markers))


async def _count_cells(flow: Flow, call: Call) -> int:
    return CellCount(flow.desk).count(call.at)


WITH_NEW = TABLE | {COUNT_CELLS: Row(DocumentArgs, _count_cells)}
"""The table with the new command's row."""


def _flow(editor: FakeEditor) -> Flow:
    async def read(folder: Path) -> Settings:
        return Settings()

    return Flow(Session(read, editor.kernel_state, decided=Choice.TRUST), editor)


async def test_a_new_command_is_one_row_and_one_verb() -> None:
    """The row makes it an LSP command (registered as every other one is), and any door
    that dispatches by name reaches it with the document's context made once."""
    server = RunfixServer()
    lsp_commands.register(server, WITH_NEW)
    assert COUNT_CELLS in server.protocol.fm.commands
    assert set(TABLE) <= set(server.protocol.fm.commands)

    editor = FakeEditor("# %%\nx = 1\n# %%\ny = 2\n# %%\nprint(x + y)\n")
    flow = _flow(editor)
    try:
        assert await dispatch(flow, COUNT_CELLS, Call(DocumentArgs(URI)), WITH_NEW) == 3
    finally:
        await flow.close()


async def test_a_command_over_the_cells_around_one_needs_a_position() -> None:
    editor = FakeEditor("# %%\nx = 1\n")
    flow = _flow(editor)
    with pytest.raises(contract.BadArguments, match="expected a position"):
        await dispatch(flow, contract.RUN_ABOVE, Call(RunArgs(URI), asyncio.Event()))
    await flow.close()


async def test_a_run_at_a_position_covers_the_code_lines_of_its_cell() -> None:
    editor = FakeEditor("# %%\nx = 1\ny = 2\n# %%\nprint(x)\n")
    flow = _flow(editor)
    where = await flow.where(URI)
    assert run_range(where, RunArgs(URI, position=Position(2))) == contract.Range.lines(1, 2)
    assert run_range(where, RunArgs(URI, position=Position(0))) == contract.Range.lines(1, 2)
    assert run_range(where, RunArgs(URI)) is None
    empty = await dispatch(flow, contract.RUN_DEPENDENTS, Call(RunArgs(URI, position=Position(4))))
    assert empty.status == Status.OK and editor.remarks == [
        "no cell below reads what this cell defines"
    ]
    await flow.close()
