"""The results desk: the one writer of what documents show (`session.store`) and the one
caller of the editor's `show`. A run's results, a note that nothing ran, a safety
finding, results restored from the record, the lines an edit moved — all are kept here
and handed to the editor as what the document now shows; the editor never reads them
back. Also a document's text now, and the wait for an applied edit to arrive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from executor.safety import Finding
from lsp_server.editor import Editor, Level, Place, Shown, Snapshot, lines_match
from lsp_server.outputs.results import DocumentResults, Problem
from lsp_server.outputs.store import LineChange
from lsp_server.record.store import RESTORE_RUNS, restored
from lsp_server.runs import Where
from lsp_server.session import Session, may_start
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.positions import strip_eol

EDIT_ARRIVAL = 5.0  # seconds to wait for the editor's didChange after an applied edit
SAFETY = "runfix safety: model-written code "
"""How a safety finding's message begins (the run asks before such code runs)."""


def _safety_problems(findings: Sequence[Finding], lines: Sequence[str]) -> list[Problem]:
    out = []
    for f in findings:
        first, last = f.line - 1, f.end_line - 1
        message = f"{SAFETY}{f.message}"
        source = tuple(strip_eol(line) for line in lines[first : last + 1])
        out.append(Problem(first, last, message, "warning", message, kind="safety", source=source))
    return out


class Desk:
    """What every document shows, kept and handed to the editor; a document's text now."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session, self.editor = session, editor
        session.store.line_name = editor.line_name
        self._noted: dict[str, Path] = {}
        """The documents that say nothing ran, and the folder each waits on."""
        self._setting: dict[str, str | None] = {}
        """Each document's `results` setting (how results show), as its last request's
        context said it."""

    def text(self, uri: str) -> Snapshot:
        """The document now; a closed one reads as empty."""
        return self.editor.text(uri) or Snapshot(0, ())

    def seen(self, where: Where) -> None:
        """A request's context was made: how its document's results show, from its settings."""
        self._setting[where.uri] = where.settings.results

    def now(self, where: Where) -> Where:
        """The same context over the document's text as it is now (after an edit)."""
        return where.now(self.text(where.uri))

    def record_id(self, where: Where, ticket: int | None) -> int | None:
        """The run record's id of a run recorded with `ticket` (None: not recorded)."""
        record = self.session.existing_record(where.folder, where.settings)
        return record.id_for(ticket) if record is not None else None

    def say_if_stale_above(self, uri: str, line: int) -> None:
        """A fix is made against the kernel's state: say so when code above the error at
        `line` changed (edited, or run again) after the error was made."""
        results = self.results(uri)
        problem = results.problem_at(line)
        front = results.stale(problem) if problem is not None and results.fronts else None
        if front is not None:
            self.editor.tell(
                f"runfix: the code above {self.editor.line_name(uri, line)} changed after this "
                f"error ({front.reason}): the kernel's state is not what the file says. "
                "Run the cells above again (runfix: Run Cells Above) before trusting a fix.",
                Level.WARNING,
                Place(uri, line),
            )

    async def restore(self, where: Where) -> None:
        """A document opened: the results its unchanged code had (`record.restored`).

        Not in a folder whose code may not run yet: its record came with the repository
        as far as anyone knows, and a repository's record can say anything."""
        uri, folder = where.uri, where.folder
        if self.editor.text(uri) is None or self.results(uri).statements:
            return
        if not may_start(where.settings, where.choice):
            return
        record = self.session.existing_record(folder, where.settings)
        if record is None:
            return  # nothing ran here yet: opening a file creates nothing in the folder
        runs = record.recent(where.path, RESTORE_RUNS)
        now = self.editor.text(uri)
        if not runs or now is None or self.results(uri).statements:
            return
        results = restored(runs, now.lines, folder)
        if results.statements:
            self.keep(uri, now.version, results)
            self.done()

    def mark_findings(self, uri: str, version: int, findings: list[Finding]) -> None:
        now = self.editor.text(uri)
        if now is None or not findings:
            return
        problems = _safety_problems(findings, now.lines)
        self.keep(uri, version, DocumentResults(problems=problems))

    async def shown(self, where: Where, first: int, code: str) -> Where | None:
        """Wait until the document holds `code` at line `first`: the context over its text
        then, else None."""
        want = code.rstrip("\n").split("\n")
        deadline = time.monotonic() + EDIT_ARRIVAL
        while time.monotonic() < deadline:
            now = self.editor.text(where.uri)
            if now is None:
                return None
            if lines_match(now.lines[first : first + len(want)], want):
                return where.now(now)
            await asyncio.sleep(0.01)
        return None

    # -- what documents show: read --------------------------------------------------------

    def results(self, uri: str) -> DocumentResults:
        """What the document shows now (read only)."""
        return self.session.store.get(uri)

    def shows(self, uri: str) -> bool:
        """Whether the document shows anything of runfix's."""
        return self.session.store.has(uri)

    def edited_above(self, uri: str, line: int) -> str | None:
        """Why what `line` made when it last ran may be stale (code above it edited since)."""
        return self.session.store.edited_above(uri, line)

    def dataflow(self, uri: str) -> DocumentMap | None:
        """Which of the document's cells read what another defines, where known."""
        return self.session.store.map(uri)

    # -- what documents show: written, and handed to the editor ---------------------------

    def show(self, uri: str, added: DocumentResults | None = None) -> None:
        """Hand the editor what the document shows now (`added`: what this change brought)."""
        setting = self._setting.get(uri)
        self.editor.show(Shown(uri, self.results(uri), added or DocumentResults(), setting))

    def done(self) -> None:
        """A piece of work ended: an editor that draws results lazily may redraw them."""
        self.editor.runs_done()

    def keep(self, uri: str, version: int, results: DocumentResults) -> None:
        """Keep results made from `version` (moved through later edits), and show them."""
        now = self.editor.text(uri)
        if now is None:
            return  # closed while it ran: its results went with it
        self.session.store.add(uri, version, results, now.lines)
        self.show(uri, results)

    def ran_again(self, uri: str, version: int, first: int, last: int) -> None:
        """Lines first..last of `version` run again: what they showed goes (`keep` shows
        what they show now)."""
        self.session.store.clear_made_at(uri, version, first, last)

    def replace(
        self, uri: str, version: int, first: int, last: int, results: DocumentResults
    ) -> None:
        """Lines first..last of `version` show `results` in place of what they showed."""
        self.session.store.clear(uri, first, last)
        self.keep(uri, version, results)

    def explain_unavailable(self, uri: str, message: str) -> None:
        """A message, and an Error diagnostic on the document's first line, saying what to
        fix (no kernel runs it here)."""
        self.editor.tell_once(message, Level.ERROR)
        now = self.editor.text(uri)
        if now is None:
            return
        first = strip_eol(now.lines[0]) if now.lines else ""
        problem = Problem(0, 0, message, "error", message, source=(first,))
        self.keep(uri, now.version, DocumentResults(problems=[problem]))

    def not_run(self, uri: str, line: int | None, folder: Path, message: str) -> None:
        """Say on the line that nothing ran because `folder` is not trusted; its quick fixes
        decide. The note goes once the folder is decided (`decided`)."""
        now = self.editor.text(uri)
        if now is None or not now.lines:
            return
        at = min(line or 0, len(now.lines) - 1)
        problem = Problem(
            at, at, message, "warning", message, kind="trust", source=(strip_eol(now.lines[at]),)
        )
        self.session.store.drop_kind(uri, "trust")
        self._noted[uri] = folder
        self.keep(uri, now.version, DocumentResults(problems=[problem]))

    def tested(
        self,
        folder: Path,
        found: Mapping[Path, Sequence[Problem]],
        ran: Callable[[Problem], bool],
    ) -> None:
        """A run of the folder's tests: on each open document of the folder, what it found
        replaces what the tests it ran showed before (`ran`), at the lines it names."""
        wanted = {path.resolve(): problems for path, problems in found.items()}
        for uri in self.editor.open_documents():
            path = Path(self.editor.path_of(uri)).resolve()
            if not path.is_relative_to(folder.resolve()):
                continue
            now = self.editor.text(uri)
            dropped = self.session.store.drop_problems(uri, ran)
            problems = wanted.get(path, ())
            if now is None or not problems:
                if dropped:
                    self.show(uri)
                continue
            placed = [
                replace(p, source=(strip_eol(now.lines[p.first]),))
                for p in problems
                if 0 <= p.first < len(now.lines)
            ]
            self.keep(uri, now.version, DocumentResults(problems=placed))

    def decided(self, folder: Path) -> None:
        """The folder's code may run, or may not, by the user's decision: the notes that
        nothing ran there go."""
        for uri in [uri for uri, noted in self._noted.items() if noted == folder]:
            del self._noted[uri]
            if self.session.store.drop_kind(uri, "trust"):
                self.show(uri)

    def edited(
        self, uri: str, version: int, changes: Sequence[LineChange], lines: Sequence[str]
    ) -> None:
        """The document was edited: its results move with the lines (shown if any did)."""
        if self.session.store.edit(uri, version, changes, lines):
            self.show(uri)

    def replaced(self, uri: str, version: int) -> None:
        """The document's whole text was replaced: nothing it showed stays."""
        self.session.store.reset(uri, version)
        self.show(uri)

    def closed(self, uri: str) -> None:
        self._noted.pop(uri, None)
        self._setting.pop(uri, None)
        self.session.store.close(uri)

    def not_python(self, uri: str) -> None:
        """The document is not Python: nothing of Python's reading of it is shown."""
        self.session.store.not_python(uri)

    def clear(self, uri: str) -> None:
        """Drop what the document shows."""
        self.session.store.clear(uri)
        self.show(uri)
