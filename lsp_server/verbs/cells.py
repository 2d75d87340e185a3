"""Running cells around one: those above it, it and those below, those below that read
what it defines (the dataflow), or every cell up to it in a restarted kernel."""

from __future__ import annotations

import asyncio

from executor.base import ExecutorUnavailable
from lsp_server.contract import RunAnswer, Status
from lsp_server.editor import KERNEL_RESTARTED, Editor, Level, Place
from lsp_server.runs import RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.runner import Runner
from lsp_server.text.cells import cell_at, split_cells
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.languages import is_python


class CellRuns:
    """The cells around one, run (`Flow.run_cells`)."""

    def __init__(self, editor: Editor, gate: Gate, runner: Runner, desk: Desk) -> None:
        self.editor, self.gate, self.runner, self.desk = editor, gate, runner, desk

    async def around(self, where: Where, line: int, which: str, cancel: asyncio.Event) -> RunAnswer:
        """Cells around the one holding `line`: `above` (the cells before it), `below` (it
        and the cells after it), `dependents` (the cells below that read what it defines,
        transitively, in file order: `dataflow`), or `to` (restart the kernel, then every
        cell up to and including it: the state a fresh notebook would have there)."""
        if which == "dependents":
            return await self.dependents(where, line, cancel)
        cell = cell_at(split_cells(where.text.lines, where.settings.prompt_markers), line)
        if cell is None:
            return RunAnswer(Status.OK, 0)
        if which == "above":
            return await self.runner.run_range(where, None, cancel, RunMode(before=cell.first))
        if which == "below":
            return await self.runner.run_range(where, None, cancel, RunMode(after=cell.first - 1))
        try:
            admitted = await self.gate.admit(where, line)
        except ExecutorUnavailable as exc:
            self.desk.explain_unavailable(where.uri, str(exc))
            return RunAnswer(Status.ERROR, 0, str(exc))
        if admitted is None:
            return RunAnswer(Status.CANCELLED, 0, "not run: the folder is not trusted")
        await admitted.kernel.restart()
        self.editor.tell_once(KERNEL_RESTARTED, Level.INFO)
        mode = RunMode(before=cell.last + 1)
        return await self.runner.run_range(admitted.where, None, cancel, mode)

    async def dependents(
        self, where: Where, line: int, cancel: asyncio.Event, *, with_above: bool = False
    ) -> RunAnswer:
        """The cells below the one holding `line` that read what it defines, directly or
        through the cells between, in file order (`with_above`: first every cell up to and
        including it, as a fresh kernel needs: `runfix run --dependents-of`)."""
        python = is_python(where.language)
        flow = DocumentMap(where.text.lines, python=python)
        index = flow.index(line)
        cells = [flow.bounds(i) for i in flow.dependents(index)] if python else []
        if not cells and not with_above:
            place = Place(where.uri, flow.bounds(index)[0])
            said = "no cell below reads what this cell defines"
            if not python:
                said = "which cells read what a cell defines is known for Python documents only"
            self.editor.remark(place, said)
            return RunAnswer(Status.OK, 0)
        if with_above:
            cells = [flow.bounds(i) for i in range(index + 1)] + cells
        return await self.runner.run_range(where, None, cancel, RunMode(within=tuple(cells)))
