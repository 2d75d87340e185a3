"""A fix once it shows in the document: what its run printed, on its lines. A candidate
proven in the jail ran in a copy of the kernel, so once applied it runs in the kernel itself,
as the user's code; one that ran in the kernel (no jail for its language) is shown as it ran.
"""

from __future__ import annotations

import asyncio

from executor.events import RunRequest
from executor.safety import scan
from executor.vouched import document_names
from lsp_server.contract import Range, Status
from lsp_server.editor import Editor, LineEdit
from lsp_server.fix.fixing import FixResult, Target, redefinition
from lsp_server.fix.ports import in_kernel
from lsp_server.folder_files import module_names
from lsp_server.runs import Piece, RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.runner import Runner
from lsp_server.services.steps import PieceRun


class Applied:
    """What an applied fix shows, and where its code runs (`FixFlow.applied`)."""

    def __init__(self, editor: Editor, gate: Gate, runner: Runner, desk: Desk) -> None:
        self.editor, self.gate, self.runner, self.desk = editor, gate, runner, desk

    async def keep(
        self,
        where: Where,
        edit: LineEdit,
        result: FixResult,
        piece: tuple[int, int],
        ran: list[PieceRun] | None = None,
    ) -> None:
        """Once the fix shows in the document, show what its run printed on its lines (and,
        for a fix in another cell, what the piece printed when it ran again after it). A
        candidate proven in the jail ran in a copy of the kernel: applied, it runs in the
        kernel itself now, as the user's code (the fixed lines, then the piece again)."""
        first, code = edit.first, edit.code
        target = result.target
        runner = self.runner
        jailed = result.outcome is not None and result.outcome.jailed is not None
        if target is not None and target.path is not None:  # the document did not change
            now = self.editor.text(where.uri)
            if now is not None and jailed:
                await self._into_module(where, target, code)
                await self._again(where.now(now), Piece(*piece), ran)
            elif now is not None and result.outcome is not None:
                runner.shown(where.now(now), result.outcome, Piece(*piece))
                self.desk.done()
            return
        shown = await self.desk.shown(where, first, code)
        if shown is None or result.outcome is None:
            return
        last = first + code.rstrip("\n").count("\n")
        moved = (last - first) - (edit.last - edit.first) if edit.last < piece[0] else 0
        again = Piece(piece[0] + moved, piece[1] + moved)
        if jailed:
            clean = await self._again(shown, Piece(first, last), ran)
            if clean and result.defined is not None:
                await self._again(self.desk.now(shown), again, ran)
        else:
            own = result.defined if result.defined is not None else result.outcome
            runner.shown(shown, own, Piece(first, last))
            if result.defined is not None:  # the piece ran again, where it stands after the edit
                runner.shown(shown, result.outcome, again)
        findings = scan(
            code,
            first + 1,
            language=where.language.unread if where.language else None,
            context=document_names("".join(shown.text.lines)),
            modules=await asyncio.to_thread(module_names, where.folder),
        )
        self.desk.mark_findings(where.uri, shown.text.version, findings)
        self.desk.done()

    async def _again(self, where: Where, piece: Piece, ran: list[PieceRun] | None = None) -> bool:
        """Lines `piece` of the document run in the kernel, as the user's (each piece's run
        added to `ran`); whether clean."""
        span = Range.lines(piece.first, piece.last)
        mode = RunMode(say_stop=False)
        went = await self.runner.run_range(where, span, asyncio.Event(), mode, ran)
        return went.status == Status.OK

    async def _into_module(self, where: Where, target: Target, code: str) -> None:
        """A module file's applied fix, put into that module in the kernel (and the names the
        user's namespace took from it rebound), as the file now says."""
        assert target.path is not None
        settings = where.settings
        request = RunRequest(
            redefinition(str(target.path), target.first, code), "<runfix>", 1,
            settings.timeout, settings.output_limit,
        )  # fmt: skip
        cancel = asyncio.Event()
        quietly = self.runner.quietly
        await in_kernel(
            self.gate, self.runner, where, cancel, lambda k, _: quietly(k, request, cancel)
        )
