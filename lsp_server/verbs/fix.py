"""The fix flow: run and fix, the offline fixes tried before a model (an import, the cells
above that define a name, a package), the attempts with the model (`fixing.Fixer`), the
check of a candidate against the cells that depend on it (`fixcheck`), and what a fix
comes to (applied, offered, or why not). It runs code through the `Flow` it serves.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from executor.distributions import provider_for
from executor.events import RunOutcome, RunStatus
from executor.text import split_lines
from lsp_server.contract import FixAnswer, Range, Status
from lsp_server.editor import Editor, Level, LineEdit, Place, Progress, Snapshot, lines_match
from lsp_server.fix.applied import Applied
from lsp_server.fix.fixing import (
    MODULE_LIMIT,
    Fixer,
    FixResult,
    Target,
    import_for,
    import_line,
    imports_by_name,
    missing_module,
    missing_name,
    module_frame,
    module_target,
    raised_line,
    reported,
    target_for,
)
from lsp_server.fix.ports import FixPorts
from lsp_server.folder_files import module_names, read_regular_file
from lsp_server.model.context import error_text
from lsp_server.runs import RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.installs import Installer
from lsp_server.services.reads import KernelReads
from lsp_server.services.runner import Runner
from lsp_server.services.steps import PieceRun
from lsp_server.session import Session
from lsp_server.text.cells import code_of
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.languages import PYTHON, is_python

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FixReport:
    """How fixing a piece went, and the edit that fixes it (when it was not applied)."""

    answer: FixAnswer
    edit: LineEdit | None = None
    version: int = 0
    """The document version the edit is for."""
    file: Path | None = None
    """The module file the edit is for (None: the document)."""
    lines: tuple[str, ...] = ()
    """That file's lines the edit was made against."""


def _outcome_error(outcome: RunOutcome) -> str:
    error = outcome.error
    return error_text(error.message, error.text) if error else outcome.note or "it failed"


def _file_holds(target: Target) -> bool:
    """Whether a module file still says what it said when its fix began: read as a regular
    file only, never through a link, never waiting on a FIFO swapped in meanwhile (a blocking
    read would stop the whole server), with the same size cap as when it was read."""
    assert target.path is not None
    try:
        data, file = read_regular_file(target.path, MODULE_LIMIT)
        now = split_lines(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return False
    return file == target.file and lines_match(now, target.lines)


def _source_lines(outcome: RunOutcome) -> list[str]:
    """The code lines a traceback shows (each frame's line): an `import` a module of the
    folder made is seen there."""
    error = outcome.error
    if error is None:
        return []
    shown = [ln.strip() for ln in error.text.splitlines() if ln.startswith("    ")]
    return [ln for ln in shown if ln and not ln.startswith(("^", "~"))]


def held_diff(path: str, lines: Sequence[str], first: int, last: int, candidate: str) -> str:
    """A held candidate in place of lines first..last of `lines`, as a unified diff (a person
    applies it by hand, or not)."""
    rows = candidate.splitlines(keepends=True)
    if rows and not rows[-1].endswith("\n"):
        rows[-1] += "\n"
    after = [*lines[:first], *rows, *lines[last + 1 :]]
    path = path.lstrip("/")  # (`patch -p1` in the folder applies it)
    changed = difflib.unified_diff(list(lines), after, f"a/{path}", f"b/{path}", n=1)
    return "".join(changed).rstrip("\n")


def _head(code: str) -> str:
    """A piece of code's first statement line, short: how a message names it."""
    head = next(
        (
            ln.strip()
            for ln in code.splitlines()
            if ln.strip() and not ln.lstrip().startswith(("#", "@"))
        ),
        "",
    )
    return head if len(head) <= 40 else head[:39] + "…"


class FixFlow:
    """Run and fix, and fixing a piece (`Flow.fixes`), over the services."""

    def __init__(
        self,
        session: Session,
        editor: Editor,
        gate: Gate,
        runner: Runner,
        desk: Desk,
        reads: KernelReads,
        installer: Installer,
    ) -> None:
        self.session, self.editor, self.gate, self.runner = session, editor, gate, runner
        self.desk, self.reads, self.installer = desk, reads, installer
        self.applied = Applied(editor, gate, runner, desk)

    # -- run and fix ----------------------------------------------------------------------

    async def run_and_fix(
        self,
        where: Where,
        line_range: Range | None,
        cancel: asyncio.Event,
        ran: list[PieceRun] | None = None,
    ) -> FixAnswer:
        """Run; fix the piece that fails and apply the fix; with no range, go on with the
        cells below it, fixing each that fails, until one cannot be fixed. `ran` collects
        each piece's run in the kernel, the applied fixes' too (a notebook saved by the
        terminal keeps what they output, as Jupyter would)."""
        attempts = 0
        after = -1
        fixed = False
        says: str | None = None
        """What the last fix's code printed, said with the answer."""
        imported: set[str] = set()
        while True:
            runs: list[PieceRun] = []
            mode = RunMode(after=after, say_stop=False)
            where = self.desk.now(where)  # each round runs the text as the last fix left it
            went = await self.runner.run_range(where, line_range, cancel, mode, runs)
            if ran is not None:
                ran.extend(runs)
            if went.status in (Status.OK, Status.CANCELLED):
                status = Status.FIXED if fixed and went.status == Status.OK else went.status
                return FixAnswer(status, attempts, says=says if status == Status.FIXED else None)
            if not runs or runs[-1].outcome.status != RunStatus.ERROR:
                message = went.message or (runs[-1].outcome.note if runs else "it did not run")
                return FixAnswer(Status.FAILED, attempts, message)
            failed = runs[-1]
            first, last = failed.piece.first, failed.piece.last
            error = failed.outcome.error.message if failed.outcome.error else ""
            if not is_python(where.language):
                error = ""  # what the offline fixes read: Python's errors (and code) only
            module = module_frame(failed.outcome.error, where.path, where.folder)
            at = None if module else await self.import_first(where, error, imported, cancel)
            if at is not None:  # an offline fix: the missing import, added and run
                fixed = True
                shift = 1 if at <= first else 0
                if line_range is not None:
                    line_range = Range.lines(
                        line_range.start.line + shift, max(line_range.end.line - 1, 0) + shift
                    )
                after = first + shift - 1
                continue
            # (what raised: the piece, and the lines the traceback shows of deeper frames)
            raised_by = [code_of(failed.lines, first, last), *_source_lines(failed.outcome)]
            if await self.install_first(where, error, imported, cancel, raised_by):
                fixed = True  # the missing package a published wheel provides: run it again
                after = first - 1
                continue
            failing = where.now(Snapshot(failed.version, failed.lines))
            if await self.define_first(failing, first, error, imported, cancel):
                fixed = True  # a cell above defines the name and had not run: it ran
                after = first - 1
                continue
            report = await self.fix_piece(
                failing,
                first,
                last,
                _outcome_error(failed.outcome),
                cancel,
                apply=True,
                fix_of=self.desk.record_id(where, failed.record_id),
                raised=raised_line(failed.outcome.error, where.path),
                module=module,
                ran=ran,
            )
            attempts += report.answer.attempts
            if report.answer.status != Status.FIXED:
                return FixAnswer(report.answer.status, attempts, report.answer.message)
            fixed, says = True, report.answer.says or says
            if line_range is not None:
                return FixAnswer(Status.FIXED, attempts, says=says)
            edit = report.edit
            if edit is not None and edit.first == first:  # the piece itself was rewritten
                after = first + edit.code.rstrip("\n").count("\n")
            elif edit is not None and edit.last < first:  # a cell above: the piece moved
                after = last + edit.code.rstrip("\n").count("\n") - (edit.last - edit.first)
            else:
                after = last

    async def import_first(
        self, where: Where, error: str, imported: set[str], cancel: asyncio.Event
    ) -> int | None:
        """The offline fix a model is not needed for, tried first: a `NameError` on a common
        alias or a standard-library module gets its import, inserted with the imports and run
        (once per name). The line it went in at; None: no such fix. (Raised in a module
        of the folder, the import goes there, by the fix loop: `Fixer._opening`.)"""
        name = missing_name(error)
        statement = import_for(name) if name else None
        if name is None or statement is None or name in imported:
            return None
        imported.add(name)
        text = self.desk.text(where.uri)
        at = import_line(text.lines)
        if not await self.editor.apply(
            where.uri, text.version, LineEdit(at, at - 1, statement), f"runfix: {statement}"
        ):
            return None
        self.editor.remark(Place(where.uri, at), f"added `{statement}` (no model needed)")
        where = await self.desk.shown(where, at, statement + "\n") or self.desk.now(where)
        ran = await self.runner.run_range(
            where, Range.lines(at, at), cancel, RunMode(say_stop=False)
        )
        return at if ran.status == Status.OK else None

    async def define_first(
        self, where: Where, first: int, error: str, tried: set[str], cancel: asyncio.Event
    ) -> bool:
        """The offline fix for a `NameError` on a name a cell above defines: that cell had
        not run (a kernel restarted, a file run from the middle). The cells above run (once
        per name), as "Run Cells Above" does, instead of a model rewriting the cell that
        used the name. Whether they ran clean."""
        name = missing_name(error)
        if name is None or f"define:{name}" in tried:
            return False
        tried.add(f"define:{name}")
        flow = DocumentMap(where.text.lines)
        above = [i for i in range(flow.index(first)) if name in flow.flow(i).defines]
        if not above:
            return False
        defined = flow.bounds(above[-1])[0]
        self.editor.remark(
            Place(where.uri, defined),
            f"`{name}` is defined at {self.editor.line_name(where.uri, defined)}, in a cell "
            "that had not run: running "
            "the cells above first (no model needed)",
        )
        mode = RunMode(before=first, say_stop=False)
        ran = await self.runner.run_range(self.desk.now(where), None, cancel, mode)
        return ran.status == Status.OK

    async def install_first(
        self,
        where: Where,
        error: str,
        tried: set[str],
        cancel: asyncio.Event,
        code: Sequence[str] = (),
    ) -> bool:
        """The other offline fix, tried before a model: a `ModuleNotFoundError` whose import
        data vouches for a distribution installs it (once), where `code` (what raised: the
        piece, the lines of its traceback) imports that module by name; a name no data
        vouches for, or one the code computes (`importlib.import_module(open('plugin.txt')
        .read())`: a data file's word), is left to the question the quick fix asks. Whether
        it was installed."""
        module = missing_module(error)
        found = provider_for(module) if module else None
        if found is None or not found.vouched or found.distribution in tried:
            return False
        if module is None or not any(imports_by_name(c, module) for c in code):
            return False
        tried.add(found.distribution)
        answer, _ = await self.installer.install(where, [found.distribution], None, cancel)
        return answer.status == Status.OK

    def _fixer(
        self,
        where: Where,
        first: int,
        progress: Progress,
        cancel: asyncio.Event,
        fix_of: int | None = None,
    ) -> Fixer:
        """The loop of one fix of lines of `where.text` from `first`, over its ports."""
        settings = where.settings
        model = self.session.model_for(settings)
        ports = FixPorts(
            where, first, progress, cancel, self.session, self.editor, self.gate,
            self.runner, model, self.reads.variables, self.reads.evidence, fix_of,
        )  # fmt: skip
        return Fixer(
            ports,
            retarget=functools.partial(
                target_for,
                where.text.lines,
                first,
                first,  # (only lines outside the piece are asked about)
                markers=settings.prompt_markers,
                python=is_python(where.language),
            ),
            path=where.path,
            max_attempts=settings.fix_max_attempts,
            candidates=settings.candidates(),
            budget=settings.context_budget,
            max_tokens=model.config.max_tokens,
            language=where.language or PYTHON,
        )

    async def fix_reported(
        self, where: Where, piece: tuple[int, int], message: str, cancel: asyncio.Event, *,
        apply: bool,
    ) -> FixReport:  # fmt: skip
        """Fix the piece whose run raised the error the document shows as `message` (a quick
        fix, "Fix with model"): its traceback, the line and the module file it was raised in
        come from the stored results."""
        problems = self.desk.results(where.uri).problems
        said = reported(problems, piece, message, where.folder)
        first, last = piece
        return await self.fix_piece(
            where, first, last, said.error, cancel, apply=apply, raised=said.raised,
            module=said.module,
        )  # fmt: skip

    async def fix_piece(
        self,
        where: Where,
        first: int,
        last: int,
        error: str,
        cancel: asyncio.Event,
        *,
        apply: bool,
        fix_of: int | None = None,
        raised: int | None = None,
        module: tuple[Path, int] | None = None,
        ran: list[PieceRun] | None = None,
    ) -> FixReport:
        """Fix lines first..last (as `where.text` had them) that raised `error`; `raised`: the
        line of the innermost frame in the document. When that is in another cell (a
        function the piece called), the fix goes there and the piece runs again as its test.

        With `apply`, the passing version is applied; else the report carries the edit
        (for `codeAction/resolve`: the user applies it or not)."""
        if where.language is None:
            message = "runfix: it does not know this document's language."
            self.editor.tell(message, Level.WARNING, Place(where.uri, first))
            return FixReport(FixAnswer(Status.FAILED, 0, message))
        lines = where.text.lines
        code = code_of(lines, first, last)
        target = (module_target(*module) if module is not None else None) or target_for(
            lines, first, last, raised, where.settings.prompt_markers, where.language.python
        )
        self.desk.say_if_stale_above(where.uri, first)
        raised_at = module[1] + 1 if module is not None else (raised or -1) + 1
        async with self.editor.progress(cancel) as progress:
            fixer = self._fixer(where, first, progress, cancel, fix_of)
            fixer.modules = await asyncio.to_thread(module_names, where.folder)
            result = await fixer.fix(lines, first, last, code, error, target, raised_at)
        return await self._settle(where, first, last, result, apply, ran)

    async def _settle(
        self,
        where: Where,
        first: int,
        last: int,
        result: FixResult,
        apply: bool,
        ran: list[PieceRun] | None = None,
    ) -> FixReport:
        """What a fix attempt comes to: an applied (or offered) edit, or why not."""
        uri, lines = where.uri, where.text.lines
        place = Place(uri, first)
        if result.status == "cancelled":
            return FixReport(FixAnswer(Status.CANCELLED, result.attempts))
        if result.status != "fixed" or result.code is None or result.outcome is None:
            self.editor.tell(f"runfix: not fixed: {result.message}", Level.WARNING, place)
            return FixReport(FixAnswer(Status.FAILED, result.attempts, result.message))
        now = self.desk.text(uri)
        target = result.target or Target(first, last, code_of(lines, first, last))
        spans = {(first, last)}
        if target.path is None:
            spans.add((target.first, target.last))
        unchanged = all(lines_match(now.lines[a : b + 1], lines[a : b + 1]) for a, b in spans)
        if not unchanged or (
            target.path is not None and not await asyncio.to_thread(_file_holds, target)
        ):
            message = "runfix: the code changed while it was being fixed; the fix was not applied."
            self.editor.tell(message, Level.ERROR, place)
            return FixReport(FixAnswer(Status.ERROR, result.attempts, message))
        edit = LineEdit(target.first, target.last, result.code)
        checked = result.label or None
        name = functools.partial(self.editor.line_name, uri)
        if target.path is not None:
            raised_at = (
                f"in `{_head(target.code)}` at {target.path.name}:{target.first + 1}, where the "
                "error was raised"
            )
            checked = f"{raised_at}; {name(first)} ran again clean" + (
                f"; {checked}" if checked else ""
            )
        elif not target.holds(first, last):
            place = Place(uri, target.first)
            raised_at = (
                f"in `{_head(target.code)}` at {name(target.first)}, where the error was raised"
            )
            checked = f"{raised_at}; {name(first)} ran again clean" + (
                f"; {checked}" if checked else ""
            )
        if apply and result.held:  # never applied without a look
            path = Path(str(target.path) if target.path else where.path)
            shown = path.relative_to(where.folder) if path.is_relative_to(where.folder) else path
            file = target.lines if target.path else lines
            diff = held_diff(shown.as_posix(), file, target.first, target.last, result.code)
            message = (
                f"runfix: the model's fix {result.held}; it was not applied. Its change, to "
                f"apply by hand if it is what you want:\n{diff}"
            )
            self.editor.tell(message, Level.WARNING, place)
            answer = FixAnswer(Status.FAILED, result.attempts, message, checked)
            return FixReport(answer)
        says = result.says or None
        if not apply:
            self.editor.spawn(self.applied.keep(where, edit, result, (first, last)), "results")
            answer = FixAnswer(Status.FIXED, result.attempts, result.message or None, checked, says)
            return FixReport(answer, edit, now.version, target.path, target.lines)
        applied = (
            await self.editor.apply_file(
                target.path, target.lines, edit, "runfix: fix", target.file
            )
            if target.path is not None
            else await self.editor.apply(uri, now.version, edit, "runfix: fix")
        )
        if not applied:
            message = "runfix: the editor did not apply the fix."
            module = target.path
            held = self.editor.text(module.as_uri()) if module is not None else None
            if (
                module is not None
                and held is not None
                and not lines_match(held.lines, target.lines)
            ):
                inside = module.is_relative_to(where.folder)
                shown = module.relative_to(where.folder) if inside else module
                message = (
                    f"runfix: the fix was not applied: {shown} is open in the editor with "
                    "changes that are not in the file it was made for (save or revert them, "
                    "then fix again)."
                )
            self.editor.tell(message, Level.ERROR, place)
            return FixReport(FixAnswer(Status.ERROR, result.attempts, message))
        said = (
            (
                f"fixed with {result.message}"
                if result.attempts == 0
                else f"fixed on attempt {result.attempts}"
            )
            + (f" ({checked})" if checked else "")
            + (f"; it now prints `{result.says}`" if result.says else "")
        )
        self.editor.remark(place, said)
        await self.applied.keep(where, edit, result, (first, last), ran)
        answer = FixAnswer(Status.FIXED, result.attempts, None, checked, says)
        return FixReport(answer, edit, now.version)
