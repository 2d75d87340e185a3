"""The results desk of a request's document: its text now, what a run showed that is worth
saying again (a stale state above an error, a restored result, a safety finding), and the
wait for an applied edit to arrive. It writes results through the runner (`Runner.keep`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from executor.safety import Finding
from lsp_server.editor import Editor, Level, Place, Snapshot, lines_match
from lsp_server.outputs.results import DocumentResults, Problem
from lsp_server.record.store import RESTORE_RUNS, restored
from lsp_server.runner import SAFETY, Runner
from lsp_server.runs import Where
from lsp_server.session import Session, may_start
from lsp_server.text.positions import strip_eol

EDIT_ARRIVAL = 5.0  # seconds to wait for the editor's didChange after an applied edit


def _safety_problems(findings: Sequence[Finding], lines: Sequence[str]) -> list[Problem]:
    out = []
    for f in findings:
        first, last = f.line - 1, f.end_line - 1
        message = f"{SAFETY}{f.message}"
        source = tuple(strip_eol(line) for line in lines[first : last + 1])
        out.append(Problem(first, last, message, "warning", message, kind="safety", source=source))
    return out


class Desk:
    """A document's text and the results said about it, for every verb."""

    def __init__(self, session: Session, editor: Editor, runner: Runner) -> None:
        self.session, self.editor, self.runner = session, editor, runner

    def text(self, uri: str) -> Snapshot:
        """The document now; a closed one reads as empty."""
        return self.editor.text(uri) or Snapshot(0, ())

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
        results = self.session.store.get(uri)
        problem = results.problem_at(line)
        front = results.stale(problem) if problem is not None and results.fronts else None
        if front is not None:
            self.editor.tell(
                f"runfix: the code above line {line + 1} changed after this error "
                f"({front.reason}): the kernel's state is not what the file says. "
                "Run the cells above again (runfix: Run Cells Above) before trusting a fix.",
                Level.WARNING,
                Place(uri, line),
            )

    async def restore(self, where: Where) -> None:
        """A document opened: the results its unchanged code had (`record.restored`).

        Not in a folder whose code may not run yet: its record came with the repository
        as far as anyone knows, and a repository's record can say anything."""
        uri, folder = where.uri, where.folder
        if self.editor.text(uri) is None or self.session.store.get(uri).statements:
            return
        if not may_start(where.settings, where.choice):
            return
        record = self.session.existing_record(folder, where.settings)
        if record is None:
            return  # nothing ran here yet: opening a file creates nothing in the folder
        runs = record.recent(where.path, RESTORE_RUNS)
        now = self.editor.text(uri)
        if not runs or now is None or self.session.store.get(uri).statements:
            return
        results = restored(runs, now.lines, folder)
        if results.statements:
            self.runner.keep(uri, now.version, results)
            self.editor.runs_done()

    def mark_findings(self, uri: str, version: int, findings: list[Finding]) -> None:
        now = self.editor.text(uri)
        if now is None or not findings:
            return
        problems = _safety_problems(findings, now.lines)
        self.runner.keep(uri, version, DocumentResults(problems=problems))

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
