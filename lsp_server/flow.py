"""The run-and-fix flow, one for the editor and for `runfix run [--fix]`.

Running: the pieces (cells, or the lines of a range) of the text as it stood
when the run was asked for, one folder's runs at a time, stopping at the first
that fails; results are stored and published after each piece.

Fixing: the model writes a candidate, it runs where the failing piece stands,
and only a candidate that ran clean is applied — as one edit, and only if the
code did not change meanwhile. Generating writes a prompt's body the same way.
Model-written code the scan flags needs the user's "Run" before it runs in the
local kernel; in the sandbox the container is the control.

The flow talks to the editor only through `editor.Editor`, and to everything
else through the `session.Session`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from executor.base import ExecutorState, ExecutorUnavailable
from executor.distributions import provider_for
from executor.events import Display, RunOutcome, RunRequest, RunStatus, Value, Variable
from executor.interpreter import find_interpreter
from executor.jupyter import Kernel
from executor.pool import create as create_kernel
from executor.safety import Finding, describe, scan
from executor.text import split_lines
from executor.trust import Choice, TrustFileError
from lsp_server.contract import (
    FixAnswer,
    GenerateAnswer,
    InstallAnswer,
    Range,
    RunAnswer,
    Status,
)
from lsp_server.editor import (
    Editor,
    Level,
    LineEdit,
    Place,
    Progress,
    Snapshot,
    TrustAnswer,
    TrustQuestion,
    lines_match,
)
from lsp_server.executors import kernel_config, sandboxed
from lsp_server.fix.fixcheck import Check, budget_for, plan, worth_comparing
from lsp_server.fix.fixcheck import check as check_against
from lsp_server.fix.fixing import (
    Fixer,
    FixResult,
    Target,
    import_for,
    import_line,
    missing_module,
    missing_name,
    module_frame,
    module_target,
    raised_line,
    redefinition,
    retry_temperature,
    target_for,
    user_module,
)
from lsp_server.model.client import ModelCancelled, ModelError
from lsp_server.model.context import (
    GENERATE_BOUND,
    ReplyError,
    error_text,
    extract_code,
    generate_messages,
)
from lsp_server.outputs.bundles import MB, OutputFiles
from lsp_server.record.store import RESTORE_RUNS, RecordedRun, entry, ran_text, restored
from lsp_server.results import DocumentResults, Problem, build
from lsp_server.runs import Piece, PieceRun, pieces_for, run_request
from lsp_server.session import NotTrusted, Session
from lsp_server.settings import Settings
from lsp_server.text.cells import cell_at, code_of, split_cells
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.positions import strip_eol
from lsp_server.text.prompts import Prompt, prompt_at, prompt_lines

log = logging.getLogger(__name__)

SHOWN_TEXT = 80  # characters of streamed text shown in progress
EDIT_ARRIVAL = 5.0  # seconds to wait for the editor's didChange after an applied edit
QUEUE_REPORTS = 0.25  # seconds between looks at what a queued run waits for
SANDBOX_CHECK = 3.0  # seconds to find out whether the sandbox can run, before asking
INSTALL_ANYWAY = "Install"
NO_INSTALL = "Don't install"
STREAM_REPORTS = 0.1  # seconds between progress reports of streamed text
CHECK_HISTORY = 500  # recorded runs of a file read for its cells' last outcomes (fix check)


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


def _run_answer(status: RunStatus | Status, began: float, message: str | None = None) -> RunAnswer:
    if isinstance(status, RunStatus):
        status = Status.ERROR if status == RunStatus.DIED else Status(status.value)
    return RunAnswer(status, round((time.perf_counter() - began) * 1000, 3), message)


def streamed(progress: Progress, prefix: str) -> Callable[[str], None]:
    """Show the model's text as it streams in: the tail of its last line, now and then."""
    last = 0.0

    def on_text(text: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < STREAM_REPORTS:
            return
        last = now
        tail = text.rstrip().rsplit("\n", 1)[-1][-SHOWN_TEXT:]
        progress.report(f"{prefix}: {tail}" if tail else prefix)

    return on_text


def _safety_problems(findings: Sequence[Finding], lines: Sequence[str]) -> list[Problem]:
    out = []
    for f in findings:
        first, last = f.line - 1, f.end_line - 1
        message = f"runfix safety: model-written code {f.message}"
        source = tuple(strip_eol(line) for line in lines[first : last + 1])
        out.append(Problem(first, last, message, "warning", message, kind="safety", source=source))
    return out


def _sandbox_ready(image: str) -> bool:
    """Whether the sandbox can run here (docker-py is imported here, off the loop)."""
    from executor.docker import sandbox_ready

    return sandbox_ready(image)


def _rich(outcome: RunOutcome) -> bool:
    """Whether a run showed more than text (images, HTML, …: files to store)."""
    return any(
        isinstance(e, (Display, Value)) and any(m != "text/plain" for m in e.data)
        for e in outcome.events
    )


def _outcome_error(outcome: RunOutcome) -> str:
    error = outcome.error
    return error_text(error.message, error.text) if error else outcome.note or "it failed"


def _file_holds(target: Target) -> bool:
    """Whether a module file still says what it said when its fix began."""
    assert target.path is not None
    try:
        with open(target.path, encoding="utf-8", newline="") as f:
            now = split_lines(f.read())
    except (OSError, UnicodeDecodeError):
        return False
    return lines_match(now, target.lines)


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


def _find_again(
    lines: Sequence[str], was: Prompt, text: str, markers: Sequence[str]
) -> Prompt | None:
    """The prompt in the document as it is now (it may have moved while the model wrote)."""
    if was.line < len(lines) and strip_eol(lines[was.line]) == text:
        return prompt_at(lines, was.line, markers)
    same = [i for i in prompt_lines(lines, markers) if strip_eol(lines[i]) == text]
    if not same:
        return None
    return prompt_at(lines, min(same, key=lambda i: abs(i - was.line)), markers)


class Flow:
    """Runs, fixes, generations and installs for any editor: what a command asks, done."""

    def __init__(self, session: Session, editor: Editor) -> None:
        self.session = session
        self.editor = editor
        self._questions: dict[Path, asyncio.Future[TrustAnswer]] = {}
        """The trust question being asked, per folder (runs meanwhile wait for its answer)."""
        self._doing: dict[Path, str] = {}
        """What a folder's run in progress waits for, for the runs queued behind it."""

    # -- reading ------------------------------------------------------------------------

    def text(self, uri: str) -> Snapshot:
        """The document now; a closed one reads as empty."""
        return self.editor.text(uri) or Snapshot(0, ())

    async def settings_for(self, uri: str) -> Settings:
        return await self.session.settings(self.editor.folder_for(uri))

    async def variables(self, uri: str) -> list[Variable]:
        """The kernel's variables if it is up; none rather than waiting on a start or a run."""
        kernel = self.session.kernels.find(self.editor.folder_for(uri))
        if kernel is None or kernel.state not in (ExecutorState.IDLE, ExecutorState.BUSY):
            return []
        try:
            return await asyncio.wait_for(kernel.variables(), 10)
        except Exception as exc:
            log.warning("could not read the kernel's variables: %s", exc)
            return []

    def error_text_for(self, uri: str, piece: tuple[int, ...], message: str) -> str:
        """The traceback of the error a fix is for (from the stored results), else its message."""
        problem = self._problem_for(uri, piece, message)
        return error_text(problem.message, problem.text) if problem is not None else message

    def raised_for(self, uri: str, piece: tuple[int, ...], message: str) -> int | None:
        """The line the error a fix is for was raised on (its diagnostic's line: the
        innermost frame in the document), where the stored results know it."""
        problem = self._problem_for(uri, piece, message)
        return problem.first if problem is not None else None

    def module_for(self, uri: str, piece: tuple[int, ...], message: str) -> tuple[Path, int] | None:
        """The module file of the folder (and its line) the error was raised in, where the
        diagnostic names one ("raised in …")."""
        problem = self._problem_for(uri, piece, message)
        folder = self.editor.folder_for(uri)
        for related in reversed(problem.related if problem is not None else ()):
            if related.path and (module := user_module(related.path, folder)) is not None:
                return module, related.line
        return None

    def _problem_for(self, uri: str, piece: tuple[int, ...], message: str) -> Problem | None:
        for problem in self.session.store.get(uri).problems:
            if problem.kind == "run" and problem.piece == piece and problem.message == message:
                return problem
        return None

    # -- results ------------------------------------------------------------------------

    def keep(self, uri: str, version: int, results: DocumentResults) -> None:
        """Store results made from `version` (moved through later edits), and publish."""
        now = self.editor.text(uri)
        if now is None:
            return  # closed while it ran: its results went with it
        self.session.store.add(uri, version, results, now.lines)
        self.editor.published(uri, results)

    async def _record_id(self, uri: str, ticket: int | None) -> int | None:
        """The run record's id of a run recorded with `ticket` (None: not recorded)."""
        folder = self.editor.folder_for(uri)
        record = self.session.existing_record(folder, await self.session.settings(folder))
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

    async def restore(self, uri: str) -> None:
        """A document opened: the results its unchanged code had (`record.restored`).

        Not in a folder whose code may not run yet: its record came with the repository
        as far as anyone knows, and a repository's record can say anything."""
        text = self.editor.text(uri)
        if text is None or self.session.store.get(uri).statements:
            return
        folder = self.editor.folder_for(uri)
        settings = await self.session.settings(folder)
        if not self.session.may_start(folder, settings):
            return
        record = self.session.existing_record(folder, settings)
        if record is None:
            return  # nothing ran here yet: opening a file creates nothing in the folder
        runs = record.recent(self.editor.path_of(uri), RESTORE_RUNS)
        now = self.editor.text(uri)
        if not runs or now is None or self.session.store.get(uri).statements:
            return
        results = restored(runs, now.lines, folder)
        if results.statements:
            self.keep(uri, now.version, results)
            self.editor.runs_done()

    def mark_findings(self, uri: str, version: int, findings: list[Finding]) -> None:
        now = self.editor.text(uri)
        if now is None or not findings:
            return
        self.keep(uri, version, DocumentResults(problems=_safety_problems(findings, now.lines)))

    def explain_unavailable(self, uri: str, message: str) -> None:
        """A message, and an Error diagnostic on the document's first line, saying what to fix."""
        self.editor.tell_once(message, Level.ERROR)
        now = self.editor.text(uri)
        if now is None:
            return
        first = strip_eol(now.lines[0]) if now.lines else ""
        problem = Problem(0, 0, message, "error", message, source=(first,))
        self.session.store.add(uri, now.version, DocumentResults(problems=[problem]), now.lines)
        self.editor.published(uri, DocumentResults(problems=[problem]))

    # -- trust ----------------------------------------------------------------------------

    async def kernel(self, uri: str, line: int | None = None) -> Kernel | None:
        """The folder's kernel, once its code may run: the first time, an undecided folder's
        user is asked how (one question per folder; runs meanwhile wait for its answer).
        None: nothing may run, and the document says so at `line`."""
        folder = self.editor.folder_for(uri)
        settings = await self.session.settings(folder)
        if not self.session.may_start(folder, settings):
            await self.session.kernels.stop(folder)  # revoked elsewhere (`runfix trust`)
            answer = await self._trust_answer(folder, settings)
            if answer.choice is None:
                self.not_trusted(uri, line, folder, answer.why)
                return None
            self.decided(folder, answer.choice)
        try:
            return await self.session.kernel_for(folder)
        except NotTrusted as exc:  # revoked while the question was out
            self.not_trusted(uri, line, folder, str(exc))
            return None

    async def _trust_answer(self, folder: Path, settings: Settings) -> TrustAnswer:
        pending = self._questions.get(folder)
        if pending is None:
            pending = asyncio.ensure_future(self._ask_trust(folder, settings))
            self._questions[folder] = pending
            pending.add_done_callback(lambda _: self._questions.pop(folder, None))
        return await asyncio.shield(pending)

    async def _ask_trust(self, folder: Path, settings: Settings) -> TrustAnswer:
        interpreter = find_interpreter(folder, settings.python)
        try:
            sandbox = await asyncio.wait_for(
                asyncio.to_thread(_sandbox_ready, settings.docker.image), SANDBOX_CHECK
            )
        except Exception:  # no engine, no image, no docker package: no sandbox to offer
            sandbox = False
        question = TrustQuestion(folder, interpreter.path, interpreter.source, sandbox)
        return await self.editor.ask_trust(question)

    def decided(self, folder: Path, choice: Choice, *, keep: bool = True) -> None:
        """The user decided how the folder's code runs: kept, and the documents' notes that
        nothing ran are dropped."""
        try:
            self.session.decide(folder, choice, keep=keep)
        except TrustFileError as exc:  # kept for this session only
            self.editor.tell(
                f"runfix: {exc}; your choice holds until the editor closes", Level.WARNING
            )
        for uri in self.editor.open_documents():
            if self.editor.folder_for(uri) == folder and self.session.store.drop_kind(uri, "trust"):
                self.editor.published(uri, DocumentResults())

    def not_trusted(self, uri: str, line: int | None, folder: Path, why: str) -> None:
        """Say on the line that nothing ran, and why; its quick fixes decide."""
        now = self.editor.text(uri)
        message = (
            f"runfix: nothing ran: {folder} is not trusted ({why}). Trust it (quick fix "
            f"'Trust this folder', or `runfix trust {folder}`) to run its code."
        )
        self.editor.remark(Place(uri, line), message)
        if now is None or not now.lines:
            return
        at = min(line or 0, len(now.lines) - 1)
        problem = Problem(
            at, at, message, "warning", message, kind="trust", source=(strip_eol(now.lines[at]),)
        )
        self.session.store.drop_kind(uri, "trust")
        self.session.store.add(uri, now.version, DocumentResults(problems=[problem]), now.lines)
        self.editor.published(uri, DocumentResults(problems=[problem]))

    # -- confirming -----------------------------------------------------------------------

    async def confirm_run(self, code: str, reason: str, settings: Settings, place: Place) -> bool:
        """Whether flagged model-written code may run.

        In the sandbox (`executor: docker`) the container is the control, so nothing is
        asked. Else the editor asks; a "Run" holds for this exact code for the session."""
        if sandboxed(settings):
            log.info("flagged model-written code runs in the sandbox: %s", reason)
            return True
        digest = hashlib.sha256(code.encode()).hexdigest()
        if digest in self.session.confirmed:
            return True
        if await self.editor.confirm(reason, place):
            self.session.confirmed.add(digest)
            return True
        log.info("flagged model-written code was not run: %s", reason)
        return False

    # -- running --------------------------------------------------------------------------

    async def _locked(self, folder_uri: str, cancel: asyncio.Event) -> asyncio.Lock | None:
        """The folder's run lock, held; None if cancelled while waiting for it."""
        folder = self.editor.folder_for(folder_uri)
        lock = self.session.run_lock(folder)
        if not lock.locked():  # free: taken at once, without a task to watch `cancel`
            await lock.acquire()
            return lock
        # Queued: the progress says behind what (a run waiting for input() can take long).
        acquired = asyncio.ensure_future(lock.acquire())
        cancelled = asyncio.ensure_future(cancel.wait())
        said: str | None = None
        try:
            async with self.editor.progress(cancel) as progress:
                while not acquired.done():
                    doing = self._doing.get(folder, "")
                    if doing != said:
                        why = f" ({doing})" if doing else ""
                        progress.report(f"Waiting for the folder's run in progress{why}")
                        said = doing
                    await asyncio.wait({acquired, cancelled}, timeout=QUEUE_REPORTS)
                    if cancelled.done() and not acquired.done():
                        return None
        finally:
            cancelled.cancel()
            acquired.cancel()  # (a no-op once it holds the lock)
        return lock

    async def run(
        self,
        uri: str,
        line_range: Range | None,
        cancel: asyncio.Event,
        *,
        runs: list[PieceRun] | None = None,
        after: int = -1,
        say_stop: bool = True,
        origin: str = "user",
        before: int | None = None,
        within: Sequence[tuple[int, int]] | None = None,
    ) -> RunAnswer:
        """Run the range's lines, or every cell (below line `after`, above line `before`,
        starting within one of the line spans `within`), stopping at the first that fails.

        What runs is the text as it stood when the run was asked for, each piece whole,
        however the document changes meanwhile; results land through the edits made
        since (or are dropped where their lines changed). Each piece that ran is
        appended to `runs` when given (the fix loop reads them)."""
        began = time.perf_counter()
        asked_at = asyncio.get_running_loop().time()
        text = self.text(uri)
        folder = self.editor.folder_for(uri)
        settings = await self.session.settings(folder)
        pieces = [
            p
            for p in pieces_for(text.lines, line_range, settings.prompt_markers)
            if p.first > after
            and (before is None or p.first < before)
            and (within is None or any(a <= p.first <= b for a, b in within))
        ]
        if not pieces:
            return _run_answer(Status.OK, began)
        flagged = {p: self.session.store.get(uri).safety_in(p.first, p.last) for p in pieces}
        kernel = await self.kernel(uri, pieces[0].first)
        if kernel is None:
            return _run_answer(Status.CANCELLED, began, "not run: the folder is not trusted")
        lock = await self._locked(uri, cancel)
        if lock is None:
            return _run_answer(Status.CANCELLED, began)
        status = RunStatus.OK
        why = ""
        files = output_files(folder, settings)  # outputs.maxRunMB is for the whole run
        try:
            async with self.editor.progress(cancel) as progress:
                for number, piece in enumerate(pieces, 1):
                    if len(pieces) > 1:
                        share = (number - 1) * 100 // len(pieces)
                        progress.report(f"Running cell {number}/{len(pieces)}", share)
                    ran = await self.run_piece(
                        uri,
                        text,
                        piece,
                        kernel,
                        settings,
                        cancel,
                        flagged[piece],
                        asked_at,
                        files,
                        origin,
                    )
                    if isinstance(ran, str):
                        return _run_answer(Status.CANCELLED, began, ran)
                    if runs is not None:
                        runs.append(ran)
                    status = ran.outcome.status
                    why = ran.outcome.note if status == RunStatus.CANCELLED else ""
                    if status != RunStatus.OK:
                        if say_stop and number < len(pieces):
                            left = len(pieces) - number
                            self.editor.remark(Place(uri), f"stopped; {left} later cell(s) not run")
                        break
        except ExecutorUnavailable as exc:
            self.explain_unavailable(uri, str(exc))
            return _run_answer(Status.ERROR, began, str(exc))
        finally:
            lock.release()
        self.editor.runs_done()
        return _run_answer(status, began, why or None)

    async def run_piece(
        self,
        uri: str,
        text: Snapshot,
        piece: Piece,
        kernel: Kernel,
        settings: Settings,
        cancel: asyncio.Event,
        flagged: list[Problem],
        asked_at: float | None = None,
        files: OutputFiles | None = None,
        origin: str = "user",
    ) -> PieceRun | str:
        """Run one piece of `text`, keeping its results (rich outputs in `files`: by default
        within a run's limit of their own); a str: why it did not run.

        Model-written code the scan flagged (`flagged`) runs only once the user confirms."""
        code = code_of(text.lines, piece.first, piece.last)
        if flagged:
            reasons = "; ".join(dict.fromkeys(p.message for p in flagged))
            reason = f"The model-written code at line {flagged[0].first + 1} {reasons}."
            if not await self.confirm_run(code, reason, settings, Place(uri, flagged[0].first)):
                return "not run: model-written code was flagged and the run was not confirmed"
        self.session.store.clear_made_at(uri, text.version, piece.first, piece.last)
        path = self.editor.path_of(uri)
        outcome = await kernel.execute(
            run_request(settings, path, code, piece.first),
            cancel=cancel,
            asked_at=asked_at,
            ask_input=(
                self._asker(self.editor.folder_for(uri), f"{path}:{piece.first + 1}", settings)
                if self.editor.features.input and not origin.startswith("agent")
                else None  # (an agent's run: nobody at the editor waits to answer it)
            ),
            on_output=self.editor.live(uri),
        )
        folder = self.editor.folder_for(uri)
        making = functools.partial(
            build,
            outcome,
            path=path,
            lines=text.lines,
            fallback_line=piece.first,
            folder=folder,
            piece=(piece.first, piece.last),
            files=files or output_files(folder, settings),
            ran=ran_text(outcome) + (f" · by {origin}" if origin.startswith("agent") else ""),
        )
        # Rich outputs are decoded and stored as files: off the loop, which keeps answering
        # (a cell that shows 4,000 images); plain text is made at once.
        results = await asyncio.to_thread(making) if _rich(outcome) else making()
        self.keep(uri, text.version, results)
        recorded = entry(path, (piece.first, piece.last), code, origin, outcome, results)
        run_id = self.record(folder, settings, recorded)
        return PieceRun(piece, outcome, text.lines, text.version, run_id)

    def _asker(
        self, folder: Path, where: str, settings: Settings
    ) -> Callable[[str, bool], Awaitable[str | None]]:
        """The code's `input()` asked through the editor, within `inputTimeout`; meanwhile
        the runs queued behind it say what they wait for."""

        async def ask(prompt: str, password: bool) -> str | None:
            self._doing[folder] = f"it waits for input() at {where}"
            try:
                return await self.editor.ask_input(prompt, password, settings.input_timeout)
            finally:
                self._doing.pop(folder, None)

        return ask

    def record(self, folder: Path, settings: Settings, run: RecordedRun) -> int | None:
        """Add a run to the folder's record; its ticket (None: not recorded)."""
        run_id = self.session.recorded(folder, settings, run)
        for message in self.session.record(folder, settings).told_once():
            self.editor.tell(f"runfix: {message}", Level.WARNING)
        return run_id

    async def run_cells(self, uri: str, line: int, which: str, cancel: asyncio.Event) -> RunAnswer:
        """Cells around the one holding `line`: `above` (the cells before it), `below` (it
        and the cells after it), `dependents` (the cells below that read what it defines,
        transitively, in file order: `dataflow`), or `to` (restart the kernel, then every
        cell up to and including it: the state a fresh notebook would have there)."""
        if which == "dependents":
            return await self.run_dependents(uri, line, cancel)
        text = self.text(uri)
        settings = await self.settings_for(uri)
        cell = cell_at(split_cells(text.lines, settings.prompt_markers), line)
        if cell is None:
            return RunAnswer(Status.OK, 0)
        if which == "above":
            return await self.run(uri, None, cancel, before=cell.first)
        if which == "below":
            return await self.run(uri, None, cancel, after=cell.first - 1)
        kernel = await self.kernel(uri, line)
        if kernel is None:
            return RunAnswer(Status.CANCELLED, 0, "not run: the folder is not trusted")
        await kernel.restart()
        self.editor.tell_once("runfix: kernel restarted; its state was cleared.", Level.INFO)
        return await self.run(uri, None, cancel, before=cell.last + 1)

    async def run_dependents(
        self, uri: str, line: int, cancel: asyncio.Event, *, with_above: bool = False
    ) -> RunAnswer:
        """The cells below the one holding `line` that read what it defines, directly or
        through the cells between, in file order (`with_above`: first every cell up to and
        including it, as a fresh kernel needs: `runfix run --dependents-of`)."""
        flow = DocumentMap(self.text(uri).lines)
        index = flow.index(line)
        cells = [flow.bounds(i) for i in flow.dependents(index)]
        if not cells and not with_above:
            where = Place(uri, flow.bounds(index)[0])
            self.editor.remark(where, "no cell below reads what this cell defines")
            return RunAnswer(Status.OK, 0)
        if with_above:
            cells = [flow.bounds(i) for i in range(index + 1)] + cells
        return await self.run(uri, None, cancel, within=cells)

    # -- run and fix ----------------------------------------------------------------------

    async def run_and_fix(
        self, uri: str, line_range: Range | None, cancel: asyncio.Event
    ) -> FixAnswer:
        """Run; fix the piece that fails and apply the fix; with no range, go on with the
        cells below it, fixing each that fails, until one cannot be fixed."""
        attempts = 0
        after = -1
        fixed = False
        imported: set[str] = set()
        while True:
            runs: list[PieceRun] = []
            ran = await self.run(uri, line_range, cancel, runs=runs, after=after, say_stop=False)
            if ran.status in (Status.OK, Status.CANCELLED):
                status = Status.FIXED if fixed and ran.status == Status.OK else ran.status
                return FixAnswer(status, attempts)
            if not runs or runs[-1].outcome.status != RunStatus.ERROR:
                message = ran.message or (runs[-1].outcome.note if runs else "it did not run")
                return FixAnswer(Status.FAILED, attempts, message)
            failed = runs[-1]
            first, last = failed.piece.first, failed.piece.last
            error = failed.outcome.error.message if failed.outcome.error else ""
            at = await self.import_first(uri, error, imported, cancel)
            if at is not None:  # an offline fix: the missing import, added and run
                fixed = True
                shift = 1 if at <= first else 0
                if line_range is not None:
                    line_range = Range.lines(
                        line_range.start.line + shift, max(line_range.end.line - 1, 0) + shift
                    )
                after = first + shift - 1
                continue
            if await self.install_first(uri, error, imported, cancel):
                fixed = True  # the missing package a published wheel provides: run it again
                after = first - 1
                continue
            if await self.define_first(uri, failed.lines, first, error, imported, cancel):
                fixed = True  # a cell above defines the name and had not run: it ran
                after = first - 1
                continue
            report = await self.fix_piece(
                uri,
                failed.lines,
                first,
                last,
                _outcome_error(failed.outcome),
                cancel,
                apply=True,
                fix_of=await self._record_id(uri, failed.record_id),
                raised=raised_line(failed.outcome.error, self.editor.path_of(uri)),
                module=module_frame(
                    failed.outcome.error, self.editor.path_of(uri), self.editor.folder_for(uri)
                ),
            )
            attempts += report.answer.attempts
            if report.answer.status != Status.FIXED:
                return FixAnswer(report.answer.status, attempts, report.answer.message)
            fixed = True
            if line_range is not None:
                return FixAnswer(Status.FIXED, attempts)
            edit = report.edit
            if edit is not None and edit.first == first:  # the piece itself was rewritten
                after = first + edit.code.rstrip("\n").count("\n")
            elif edit is not None and edit.last < first:  # a cell above: the piece moved
                after = last + edit.code.rstrip("\n").count("\n") - (edit.last - edit.first)
            else:
                after = last

    async def import_first(
        self, uri: str, error: str, imported: set[str], cancel: asyncio.Event
    ) -> int | None:
        """The offline fix a model is not needed for, tried first: a `NameError` on a common
        alias or a standard-library module gets its import, inserted with the imports and run
        (once per name). The line it went in at; None: no such fix."""
        name = missing_name(error)
        statement = import_for(name) if name else None
        if name is None or statement is None or name in imported:
            return None
        imported.add(name)
        text = self.text(uri)
        at = import_line(text.lines)
        if not await self.editor.apply(
            uri, text.version, LineEdit(at, at - 1, statement), f"runfix: {statement}"
        ):
            return None
        self.editor.remark(Place(uri, at), f"added `{statement}` (no model needed)")
        await self.shown(uri, at, statement + "\n")
        ran = await self.run(uri, Range.lines(at, at), cancel, say_stop=False)
        return at if ran.status == Status.OK else None

    async def define_first(
        self,
        uri: str,
        lines: Sequence[str],
        first: int,
        error: str,
        tried: set[str],
        cancel: asyncio.Event,
    ) -> bool:
        """The offline fix for a `NameError` on a name a cell above defines: that cell had
        not run (a kernel restarted, a file run from the middle). The cells above run (once
        per name), as "Run Cells Above" does, instead of a model rewriting the cell that
        used the name. Whether they ran clean."""
        name = missing_name(error)
        if name is None or f"define:{name}" in tried:
            return False
        tried.add(f"define:{name}")
        flow = DocumentMap(lines)
        above = [i for i in range(flow.index(first)) if name in flow.flow(i).defines]
        if not above:
            return False
        where = flow.bounds(above[-1])
        self.editor.remark(
            Place(uri, where[0]),
            f"`{name}` is defined at line {where[0] + 1}, in a cell that had not run: running "
            "the cells above first (no model needed)",
        )
        ran = await self.run(uri, None, cancel, before=first, say_stop=False)
        return ran.status == Status.OK

    async def install_first(
        self, uri: str, error: str, tried: set[str], cancel: asyncio.Event
    ) -> bool:
        """The other offline fix, tried before a model: a `ModuleNotFoundError` whose import
        data vouches for a distribution installs it (once); a name no data vouches for is
        left to the question the quick fix asks. Whether it was installed."""
        module = missing_module(error)
        found = provider_for(module) if module else None
        if found is None or not found.vouched or found.distribution in tried:
            return False
        tried.add(found.distribution)
        answer = await self.install(uri, [found.distribution], None, cancel)
        return answer.status == Status.OK

    def _fixer(
        self,
        uri: str,
        first: int,
        settings: Settings,
        progress: Progress,
        cancel: asyncio.Event,
        fix_of: int | None = None,
        lines: Sequence[str] | None = None,
        last: int = 0,
    ) -> Fixer:
        model = self.session.model_for(settings)
        folder = self.editor.folder_for(uri)
        path = self.editor.path_of(uri)

        async def ask(messages: list[dict[str, str]], what: str, bound: int, asked: int) -> str:
            reading = model.prompt_tokens(messages)
            progress.report(f"{what}: the model is reading the prompt (~{reading:,} tokens)")
            return await model.complete(
                messages,
                on_text=streamed(progress, what),
                cancel=cancel,
                max_tokens=bound,
                temperature=retry_temperature(model.config.temperature) if asked else None,
                seed=(model.config.seed or 0) + asked if asked else None,
            )

        async def confirm(code: str, findings: list[Finding]) -> bool:
            reason = f"The model's fix {describe(findings)}."
            return await self.confirm_run(code, reason, settings, Place(uri, first))

        async def execute(request: RunRequest) -> tuple[RunOutcome, bool]:
            """In the folder's kernel, behind the folder's other runs; whether it ran."""
            kernel = await self.kernel(uri, first)
            if kernel is None:
                note = "the folder is not trusted"
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note=note), False
            lock = await self._locked(uri, cancel)
            if lock is None:
                note = "cancelled before it ran"
                return RunOutcome(RunStatus.CANCELLED, (), 0.0, note=note), False
            try:
                return await kernel.execute(request, cancel=cancel), True
            finally:
                lock.release()

        async def run(code: str, at: int) -> RunOutcome:
            """A candidate runs where it would stand (line `at`); its results are not kept."""
            outcome, ran = await execute(run_request(settings, path, code, at))
            if not ran:
                return outcome
            # Recorded as a model-written run at the lines it would have (its rich outputs
            # are not stored: it is an attempt, shown in the document only once applied).
            lines = [""] * at + code.splitlines(keepends=True)
            results = build(outcome, path=path, lines=lines, fallback_line=at, folder=None)
            piece = (at, len(lines) - 1)
            self.record(
                folder, settings, entry(path, piece, code, "model", outcome, results, fix_of)
            )
            return outcome

        def report(message: str) -> None:
            progress.report(message)
            self.editor.remark(Place(uri, first), f"fixing, {message}")

        async def redefine(target: Target, candidate: str) -> RunOutcome:
            """A module file's candidate, put into that module in the kernel (and the names
            the user's namespace took from it rebound): what the file will say once fixed."""
            assert target.path is not None
            code = redefinition(str(target.path), target.first, candidate)
            request = RunRequest(code, "<runfix>", 1, settings.timeout, settings.output_limit)
            return (await execute(request))[0]

        async def verify(candidate: str, target: Target) -> Check | None:
            if not settings.fix_check_dependents or lines is None or target.path is not None:
                return None
            progress.report("checking the cells that depend on it, in a throwaway kernel")
            checked = await self.check_fix(
                uri, lines, target.first, target.last, candidate, settings, cancel
            )
            if checked.status == "checked" and not checked.verdicts:
                return None  # no cell depends on it: nothing to say
            self.editor.remark(Place(uri, first), f"fix candidate: {checked.label}")
            return checked

        return Fixer(
            ask=ask,
            run=run,
            variables=lambda: self.variables(uri),
            confirm=confirm,
            report=report,
            max_attempts=settings.fix_max_attempts,
            budget=settings.context_budget,
            verify=verify,
            max_tokens=model.config.max_tokens,
            redefine=redefine,
        )

    async def fix_piece(
        self,
        uri: str,
        lines: Sequence[str],
        first: int,
        last: int,
        error: str,
        cancel: asyncio.Event,
        *,
        apply: bool,
        fix_of: int | None = None,
        raised: int | None = None,
        module: tuple[Path, int] | None = None,
    ) -> FixReport:
        """Fix lines first..last (as `lines` had them) that raised `error`; `raised`: the
        line of the innermost frame in the document. When that is in another cell (a
        function the piece called), the fix goes there and the piece runs again as its test.

        With `apply`, the passing version is applied; else the report carries the edit
        (for `codeAction/resolve`: the user applies it or not)."""
        settings = await self.settings_for(uri)
        code = code_of(lines, first, last)
        target = (module_target(*module) if module is not None else None) or target_for(
            lines, first, last, raised, settings.prompt_markers
        )
        self.say_if_stale_above(uri, first)
        async with self.editor.progress(cancel) as progress:
            fixer = self._fixer(uri, first, settings, progress, cancel, fix_of, lines, last)
            result = await fixer.fix(lines, first, last, code, error, target)
        return await self._settle(uri, lines, first, last, result, apply)

    async def check_fix(
        self,
        uri: str,
        lines: Sequence[str],
        first: int,
        last: int,
        candidate: str,
        settings: Settings,
        cancel: asyncio.Event,
    ) -> Check:
        """Run `candidate` in place of lines first..last, after the cells above, then the cells
        that depend on its cell, in a throwaway kernel; compare them with their last runs."""
        folder = self.editor.folder_for(uri)
        path = self.editor.path_of(uri)
        record = self.session.existing_record(folder, settings)
        recorded = worth_comparing(record.recent(path, CHECK_HISTORY) if record else [])
        planned = plan(lines, first, last, candidate, recorded)
        if planned is None:
            return Check("checked")
        budget = budget_for(planned.seconds, settings.fix_check_budget)
        config = kernel_config(folder, settings)

        def make() -> Kernel:
            return create_kernel(
                folder, config, grace=settings.interrupt_grace,
                startup_timeout=settings.kernel_start_timeout,
            )  # fmt: skip

        def request(code: str, where: str, line: int) -> RunRequest:
            return run_request(settings, where, code, line)

        above, fixed, dependents = planned.above, planned.fixed, planned.dependents
        return await check_against(make, path, above, fixed, dependents, budget, request, cancel)

    async def _settle(
        self, uri: str, lines: Sequence[str], first: int, last: int, result: FixResult, apply: bool
    ) -> FixReport:
        """What a fix attempt comes to: an applied (or offered) edit, or why not."""
        place = Place(uri, first)
        if result.status == "cancelled":
            return FixReport(FixAnswer(Status.CANCELLED, result.attempts))
        if result.status != "fixed" or result.code is None or result.outcome is None:
            self.editor.tell(f"runfix: not fixed: {result.message}", Level.WARNING, place)
            return FixReport(FixAnswer(Status.FAILED, result.attempts, result.message))
        now = self.text(uri)
        target = result.target or Target(first, last, code_of(lines, first, last))
        spans = {(first, last)}
        if target.path is None:
            spans.add((target.first, target.last))
        unchanged = all(lines_match(now.lines[a : b + 1], lines[a : b + 1]) for a, b in spans)
        if not unchanged or (target.path is not None and not _file_holds(target)):
            message = "runfix: the code changed while it was being fixed; the fix was not applied."
            self.editor.tell(message, Level.ERROR, place)
            return FixReport(FixAnswer(Status.ERROR, result.attempts, message))
        edit = LineEdit(target.first, target.last, result.code)
        checked = result.label or None
        if target.path is not None:
            where = (
                f"in `{_head(target.code)}` at {target.path.name}:{target.first + 1}, where the "
                "error was raised"
            )
            checked = f"{where}; line {first + 1} ran again clean" + (
                f"; {checked}" if checked else ""
            )
        elif not target.holds(first, last):
            place = Place(uri, target.first)
            where = (
                f"in `{_head(target.code)}` at line {target.first + 1}, where the error was raised"
            )
            checked = f"{where}; line {first + 1} ran again clean" + (
                f"; {checked}" if checked else ""
            )
        if apply and result.held:  # never applied without a look
            message = (
                f"runfix: the model's fix {result.held}; it was not applied. Its code:\n"
                f"{result.code.rstrip()}"
            )
            self.editor.tell(message, Level.WARNING, place)
            answer = FixAnswer(Status.FAILED, result.attempts, message, checked)
            return FixReport(answer)
        if not apply:
            self.editor.spawn(self.keep_candidate(uri, edit, result, (first, last)), "results")
            answer = FixAnswer(Status.FIXED, result.attempts, result.message or None, checked)
            return FixReport(answer, edit, now.version, target.path, target.lines)
        applied = (
            await self.editor.apply_file(target.path, target.lines, edit, "runfix: fix")
            if target.path is not None
            else await self.editor.apply(uri, now.version, edit, "runfix: fix")
        )
        if not applied:
            message = "runfix: the editor did not apply the fix."
            self.editor.tell(message, Level.ERROR, place)
            return FixReport(FixAnswer(Status.ERROR, result.attempts, message))
        said = (
            f"fixed with {result.message}"
            if result.attempts == 0
            else f"fixed on attempt {result.attempts}"
        ) + (f" ({checked})" if checked else "")
        self.editor.remark(place, said)
        await self.keep_candidate(uri, edit, result, (first, last))
        return FixReport(FixAnswer(Status.FIXED, result.attempts, None, checked), edit, now.version)

    async def shown(self, uri: str, first: int, code: str) -> int | None:
        """Wait until the document holds `code` at line `first`; its version then, else None."""
        want = code.rstrip("\n").split("\n")
        deadline = time.monotonic() + EDIT_ARRIVAL
        while time.monotonic() < deadline:
            now = self.editor.text(uri)
            if now is None:
                return None
            if lines_match(now.lines[first : first + len(want)], want):
                return now.version
            await asyncio.sleep(0.01)
        return None

    async def keep_candidate(
        self, uri: str, edit: LineEdit, result: FixResult, piece: tuple[int, int]
    ) -> None:
        """Once the fix shows in the document, show what its run printed on its lines (and,
        for a fix in another cell, what the piece printed when it ran again after it)."""
        first, code = edit.first, edit.code
        target = result.target
        if target is not None and target.path is not None:  # the document did not change
            now = self.editor.text(uri)
            if now is not None and result.outcome is not None:
                self._keep_run(uri, now.version, result.outcome, *piece)
                self.editor.runs_done()
            return
        version = await self.shown(uri, first, code)
        if version is None or result.outcome is None:
            return
        last = first + code.rstrip("\n").count("\n")
        own = result.defined if result.defined is not None else result.outcome
        self._keep_run(uri, version, own, first, last)
        if result.defined is not None:  # the piece ran again, where it stands after the edit
            moved = (last - first) - (edit.last - edit.first) if edit.last < piece[0] else 0
            self._keep_run(uri, version, result.outcome, piece[0] + moved, piece[1] + moved)
        self.mark_findings(uri, version, scan(code, first + 1))
        self.editor.runs_done()

    def _keep_run(self, uri: str, version: int, outcome: RunOutcome, first: int, last: int) -> None:
        now = self.editor.text(uri)
        if now is None:
            return
        folder = self.editor.folder_for(uri)
        results = build(
            outcome,
            path=self.editor.path_of(uri),
            lines=now.lines,
            fallback_line=first,
            folder=folder,
            piece=(first, last),
            files=output_files(folder, self.session.cached_settings(folder)),
        )
        self.session.store.clear(uri, first, last)
        self.keep(uri, version, results)

    # -- generate -------------------------------------------------------------------------

    async def generate(
        self, uri: str, line: int, run: bool, cancel: asyncio.Event
    ) -> GenerateAnswer:
        """Write (or rewrite) the body of the prompt on `line`; with `run`, run it too."""
        text = self.text(uri)
        settings = await self.settings_for(uri)
        prompt = prompt_at(text.lines, line, settings.prompt_markers)
        if prompt is None:
            return self._failed(f"runfix: line {line + 1} is not a prompt (`# ai: …`).")
        prompt_line = strip_eol(text.lines[prompt.line])
        variables = await self.variables(uri)
        messages = generate_messages(
            prompt.text,
            text.lines,
            prompt.line,
            (prompt.body_first, prompt.body_last),
            variables,
            settings.context_budget,
        )
        model = self.session.model_for(settings)
        async with self.editor.progress(cancel) as progress:
            reading = model.prompt_tokens(messages)
            progress.report(
                f"Generating: {prompt.text[:60]}: the model is reading the prompt "
                f"(~{reading:,} tokens)"
            )
            try:
                reply = await model.complete(
                    messages,
                    on_text=streamed(progress, "Generating"),
                    cancel=cancel,
                    max_tokens=GENERATE_BOUND,
                )
            except ModelCancelled:
                return GenerateAnswer(Status.CANCELLED)
            except ModelError as exc:
                return self._failed(f"runfix: {exc}")
        try:
            body = range(prompt.body_first, prompt.body_last + 1)
            shown = [line for i, line in enumerate(text.lines) if i not in body]
            code = extract_code(reply, prompt_line=prompt_line, context=shown)
        except ReplyError as exc:
            return self._failed(f"runfix: nothing was inserted: {exc}.")
        text = self.text(uri)
        now = _find_again(text.lines, prompt, prompt_line, settings.prompt_markers)
        if now is None:
            return self._failed(
                "runfix: the prompt changed while the model wrote; nothing was inserted."
            )
        edit = LineEdit(now.body_first, now.body_last, code)
        label = "runfix: regenerate" if now.has_body else "runfix: generate"
        if not await self.editor.apply(uri, text.version, edit, label):
            return self._failed("runfix: the editor did not apply the generated code.")
        first, last = now.body_first, now.body_first + code.rstrip("\n").count("\n")
        answer = GenerateAnswer(Status.OK, Range.lines(first, last))
        version = await self.shown(uri, first, code)
        if version is None:
            log.warning("the generated code did not show up in %s; it will not be run", uri)
            return answer
        self.mark_findings(uri, version, scan(code, first + 1))
        if run or settings.auto_run:
            ran = await self.run(uri, Range.lines(first, last), cancel, origin="model")
            answer = GenerateAnswer(Status.OK, answer.range, ran)
        return answer

    def _failed(self, message: str) -> GenerateAnswer:
        self.editor.tell(message, Level.ERROR)
        return GenerateAnswer(Status.ERROR, message=message)

    # -- install --------------------------------------------------------------------------

    async def install(
        self,
        uri: str,
        packages: list[str],
        rerun: Range | None,
        cancel: asyncio.Event,
        ask: str | None = None,
    ) -> InstallAnswer:
        """Install distributions into the folder's kernel; then re-run what failed. With
        `ask` (why no data vouches for the name), only once the user says so."""
        if ask is not None:
            shown = ", ".join(packages)
            message = (
                f"runfix: install {shown}? {ask[:1].upper()}{ask[1:]}; a package of that name "
                "may be someone else's. Check its page on PyPI first."
            )
            if await self.editor.choose(message, (INSTALL_ANYWAY, NO_INSTALL)) != INSTALL_ANYWAY:
                return InstallAnswer(Status.CANCELLED, f"not installed: {shown} was not confirmed")
        kernel = await self.kernel(uri, rerun.start.line if rerun else None)
        shown = " ".join(packages)
        if kernel is None:
            return InstallAnswer(Status.CANCELLED, "not installed: the folder is not trusted")

        def failed(message: str, output: str | None = None) -> InstallAnswer:
            self.editor.tell(message, Level.ERROR)
            return InstallAnswer(Status.ERROR, message, output)

        if (why := kernel.install_blocked()) is not None:
            return failed(f"runfix: cannot install {shown}. {why}")
        try:
            async with self.editor.progress(cancel) as progress:
                progress.report(f"Installing {shown}")
                result = await kernel.install(
                    packages,
                    on_line=lambda line: progress.report(
                        f"Installing {shown}: {line[-SHOWN_TEXT:]}"
                    ),
                    cancel=cancel,
                )
        except ExecutorUnavailable as exc:
            return failed(f"runfix: cannot install {shown}: {exc}")
        if result.cancelled:
            return InstallAnswer(Status.CANCELLED)
        if not result.ok:
            tail = "\n".join(result.output.strip().splitlines()[-5:])
            return failed(f"runfix: installing {shown} failed:\n{tail}", result.output)
        self.editor.tell(f"runfix: installed {shown}.", Level.INFO)
        if rerun is None:
            return InstallAnswer(Status.OK)
        with suppress(Exception):
            await kernel.execute(
                RunRequest("import importlib\nimportlib.invalidate_caches()\n", "<runfix>", 1, 30)
            )
        return InstallAnswer(Status.OK, run=await self.run(uri, rerun, cancel))


def output_files(folder: Path, settings: Settings) -> OutputFiles:
    """Where a run's rich outputs go, within the settings' limits."""
    return OutputFiles(
        folder, int(settings.outputs_run_mb * MB), int(settings.outputs_folder_mb * MB)
    )
