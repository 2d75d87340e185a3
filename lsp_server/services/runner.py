"""The runner: the one place a piece of code runs for the user.

A piece runs behind the folder's other runs (`Runner.locked`), in its kernel, and what it
did is made into results on the lines it ran on, handed to the results desk
(`services.desk`: kept through the edits made meanwhile, and shown), and recorded in the
folder's run record. Plain runs, a fix's attempts, a candidate's results once applied,
agents' runs and `runfix run` all come here; runfix's own code (a module's redefinition,
an import cache reset) runs through `quietly`.
The fix check's throwaway kernels are the only other caller of a kernel's `execute`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.events import Error, Jail, RunOutcome, RunRequest, RunStatus
from executor.jupyter import Kernel
from lsp_server.contract import Range, RunAnswer, Status
from lsp_server.editor import Editor, Place
from lsp_server.executors import sandboxed
from lsp_server.outputs.bundles import MB, OutputFiles
from lsp_server.outputs.results import build
from lsp_server.record.store import Asked
from lsp_server.runs import EVERY_PIECE, Piece, RunMode, Where
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.queue import FolderQueue
from lsp_server.services.range_steps import (
    Admitted,
    Confirmed,
    Locked,
    Progressed,
    Published,
    RangeRun,
    RangeStep,
    Shared,
    StopSaid,
    surrounds,
)
from lsp_server.services.steps import (
    Announced,
    Kept,
    LateOutputs,
    PieceRun,
    Recorded,
    Running,
    Shaped,
    Step,
)
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.text.cells import code_of
from lsp_server.text.languages import is_python


def run_answer(status: RunStatus | Status, began: float, message: str | None = None) -> RunAnswer:
    """A run's answer to the editor: its status, its time since `began`, what to say."""
    if isinstance(status, RunStatus):
        status = Status.ERROR if status == RunStatus.DIED else Status(status.value)
    return RunAnswer(status, round((time.perf_counter() - began) * 1000, 3), message)


def run_request(
    settings: Settings, path: str, code: str, first: int, timeout: float | None = None
) -> RunRequest:
    """Code standing at line `first` (0-based) of the document `path`, with the settings' limits."""
    return RunRequest(
        code=code,
        filename=path,
        first_line=first + 1,
        timeout=timeout or settings.timeout,
        output_limit=settings.output_limit,
    )


Before = tuple[str, str, int]
"""A piece that runs before another in the same run: its code, filename, first line (1-based)."""
JAIL_ORIGINS = ("model", "offline")
"""Whose code runs in the jail first: the model's, and runfix's own offline fixes (a failed
attempt never changes the user's state)."""


def jail_for(
    where: Where, origin: str, kernel: Kernel, before: tuple[Before, ...] = ()
) -> Jail | None:
    """The jail `origin`'s code runs in first in `kernel` (a Python kernel with runfix's
    helper), within the run's timeout, `before` run first there; None: it runs in the
    kernel."""
    if origin not in JAIL_ORIGINS or kernel.plain or not is_python(where.language):
        return None
    secrets = tuple(where.settings.secret_extra_names)
    return Jail.within(where.settings.timeout, before=before, secrets=secrets)


HELD = "runfix held the model's code"
"""How a run's answer begins when the model's code was held (the terminal writes nothing)."""


def held(proof: RunOutcome, what: str) -> RunOutcome:
    """The jail's outcome of code that did not run in the kernel for what it tried (or
    because there is no jail): said as its error, on its first line."""
    message = (
        f"{HELD}: it tried {what}. It did not run in your kernel."
        if proof.jailed is not None and proof.jailed.tried
        else f"{HELD} ({what}); it did not run in your kernel."
    )
    error = Error("HeldByJail", message, (), message)
    kept = tuple(e for e in proof.events if not isinstance(e, Error))
    return replace(proof, status=RunStatus.ERROR, events=(*kept, error), note=message)


def output_files(folder: Path, settings: Settings) -> OutputFiles:
    """Where a run's rich outputs go, within the settings' limits."""
    return OutputFiles(
        folder, int(settings.outputs_run_mb * MB), int(settings.outputs_folder_mb * MB)
    )


class Runner:
    """Runs pieces of code for the user, one folder's runs at a time (`Flow.runner`)."""

    def __init__(self, session: Session, editor: Editor, gate: Gate, desk: Desk) -> None:
        self.session, self.editor, self.gate, self.desk = session, editor, gate, desk
        self.queue = FolderQueue(session, editor)
        self.started: dict[str, int] = {}
        """How many runs each document's lines have had (a run's late outputs are shown only
        while no other has started since)."""
        self.range_steps: list[RangeStep] = [
            Admitted(gate),
            Published(desk),
            Locked(self.queue),
            Progressed(editor),
            Confirmed(gate, desk, editor),
            Shared(editor),
            StopSaid(editor),
        ]
        """What happens around a run of a document's pieces, in order (`range_steps`)."""
        self.steps: list[Step] = [
            Announced(desk, self.started),
            Shaped(),
            Kept(desk),
            Recorded(session, editor),
            LateOutputs(editor, desk, session, self.started),
        ]
        """What happens around each piece's run, in order (`services.steps`)."""

    def doing(self, folder: Path, why: str | None) -> None:
        """What the folder's run in progress waits for now (`FolderQueue.doing`)."""
        self.queue.doing(folder, why)

    async def locked(self, where: Where, cancel: asyncio.Event) -> asyncio.Lock | None:
        """The folder's run lock, held; None if cancelled while queued (`FolderQueue`)."""
        return await self.queue.locked(where, cancel)

    async def run_range(
        self,
        where: Where,
        line_range: Range | None,
        cancel: asyncio.Event,
        mode: RunMode = EVERY_PIECE,
        runs: list[PieceRun] | None = None,
    ) -> RunAnswer:
        """Run the range's lines, or every cell `mode` takes (below a line, above one,
        starting within line spans), in order, each whole, stopping at the first that does
        not end well; around them, the range's steps (`range_steps`: admission, the lock,
        progress, confirmation, publishing).

        What runs is `where.text` (the text as it stood when the run was asked for), each
        piece whole, however the document changes meanwhile; results land through the
        edits made since (or are dropped where their lines changed). Each piece that ran
        is appended to `runs` when given (the fix loop reads them)."""
        began = time.perf_counter()
        asked_at = asyncio.get_running_loop().time()
        pieces = mode.pieces(where, line_range)
        if not pieces:
            return run_answer(Status.OK, began)
        run = RangeRun(where, pieces, cancel, mode)
        try:
            await self._run_pieces(run, asked_at)
        except ExecutorUnavailable as exc:
            self.desk.explain_unavailable(where.uri, str(exc))
            return run_answer(Status.ERROR, began, str(exc))
        finally:
            if runs is not None:
                runs.extend(run.ran)
        if run.stopped is not None:
            return run_answer(Status.CANCELLED, began, run.stopped or None)
        outcome = run.ran[-1].outcome
        held = outcome.note.startswith(HELD)
        why = outcome.note if outcome.status == RunStatus.CANCELLED or held else ""
        return run_answer(outcome.status, began, why or None)

    async def _run_pieces(self, run: RangeRun, asked_at: float) -> None:
        """`run`'s pieces, in order, inside the range's steps."""
        async with contextlib.AsyncExitStack() as around:
            for step in self.range_steps:
                if not surrounds(step):
                    continue
                await around.enter_async_context(step.around(run))
                if run.stopped is not None:
                    return
            assert run.kernel is not None  # (a step admitted the run)
            files = output_files(run.where.folder, run.where.settings)  # maxRunMB: the whole run
            for number, piece in enumerate(run.pieces, 1):
                for step in self.range_steps:
                    await step.before(run, number, piece)
                    if run.stopped is not None:
                        return
                one = await self.run(
                    run.where, piece, run.kernel, run.cancel, origin=run.mode.origin,
                    asked_at=asked_at, files=files, model=run.mode.asked,
                )  # fmt: skip
                run.ran.append(one)
                for step in self.range_steps:
                    step.after(run, number, one)
                if one.outcome.status != RunStatus.OK:
                    return

    async def run(
        self,
        where: Where,
        piece: Piece,
        kernel: Kernel,
        cancel: asyncio.Event,
        *,
        origin: str = "user",
        keep: bool = True,
        asked_at: float | None = None,
        files: OutputFiles | None = None,
        fix_of: int | None = None,
        model: Asked | None = None,
        before: tuple[Before, ...] = (),
        proof_only: bool = False,
    ) -> PieceRun:
        """Run lines `piece` of `where.text` (the caller holds the folder's lock) and record
        the run. With `keep`, its results are kept and published, what it prints shows as it
        comes and its `input()` is asked at the editor; else (a fix's attempt, an agent's code
        in no open document) they are only the answer, and an attempt's rich outputs are not
        stored (`origin` "model": it shows in the document only once applied). `before`:
        pieces of the model's code that run first, unrecorded (a fix's candidate before the
        cell that is its test), in the same jail where it runs in one; what the first that
        fails raised is the answer. `proof_only`: the model's code runs in the jail or not at
        all, nothing asked (code the user did not ask to run: Generate's candidates)."""
        text = where.text
        code = (
            code_of(text.lines, piece.first, piece.last)
            if keep  # a document's piece, newline-terminated as its cells are split
            else "".join(text.lines[piece.first : piece.last + 1])  # as it was given
        )
        agent, attempt = origin.startswith("agent"), not keep and origin == "model"
        request = run_request(where.settings, where.path, code, piece.first)
        guarded = origin == "model" or (agent and where.settings.guard_agents)
        if guarded:  # the model's code: under the runtime guard (`executor/_kernel_guard.py`)
            request = replace(request, guard=self.gate.guard_for(where, code))
        jail = jail_for(where, origin, kernel, before)
        files = None if attempt else files or output_files(where.folder, where.settings)
        asker = (
            self._asker(where, f"{where.path}:{piece.first + 1}")
            if keep and self.editor.features.input and not agent
            else None  # (an agent's run: nobody at the editor waits to answer it)
        )
        running = Running(where, piece, code, origin, keep, files, fix_of, model)
        for step in self.steps:
            step.before(running)
        run = functools.partial(
            kernel.execute,
            cancel=cancel,
            asked_at=asked_at,
            ask_input=asker,
            on_output=self.editor.live(where.uri) if keep else None,
            on_late=running.on_late,
        )
        outcome = None
        if jail is None and proof_only:
            outcome = held(RunOutcome(RunStatus.ERROR, (), 0.0), "no jail here")
        elif jail is None and origin in JAIL_ORIGINS and not sandboxed(where.settings):
            outcome = await self._asked(where, piece, code)  # (no jail for this kernel)
        if jail is not None:  # the model's code runs in the jail first
            proven = self._proven(where, piece, request, jail, keep, run, cancel, proof_only)
            outcome = await proven
            if outcome is None and guarded:  # (what the user let it do, the guard lets it)
                request = replace(request, guard=self.gate.guard_for(where, code))
        for code_before, name, line in before if outcome is None else ():
            first = await run(
                RunRequest(code_before, name, line, request.timeout, request.output_limit,
                           guard=self.gate.guard_for(where, code_before) if guarded else None),
                on_output=None, ask_input=None, on_late=None,
            )  # fmt: skip
            if first.status != RunStatus.OK:
                outcome = first
                break
        if outcome is None:
            outcome = await run(request)
        while guarded and outcome.refused and not cancel.is_set():
            place = Place(where.uri, piece.first)
            if not await self.gate.allow_refused(where, outcome.refused, place):
                break  # (the run ends with the guard's reason)
            outcome = await run(replace(request, guard=self.gate.guard_for(where, code)))
        running.outcome = outcome
        for step in self.steps:
            await step.after(running)
        return PieceRun(piece, outcome, text.lines, text.version, running.run_id, running.results)

    async def _proven(
        self,
        where: Where,
        piece: Piece,
        request: RunRequest,
        jail: Jail,
        keep: bool,
        run: Callable[..., Awaitable[RunOutcome]],
        cancel: asyncio.Event,
        proof_only: bool = False,
    ) -> RunOutcome | None:
        """Model-written `request` run in the jail (a confined fork of `kernel`): its outcome
        where that is the answer — a fix's attempt, code that failed there, code held for
        what it tried — or None where it now runs in the kernel itself: it ran clean and
        tried nothing, the user let code that tried something run there, or there is no
        jail here and the user (or the sandbox) said it may. `proof_only`: nothing is asked,
        and what the jail cannot prove is held."""
        proof = await run(
            replace(request, jail=jail, guard=None), on_output=None, ask_input=None, on_late=None
        )
        jailed = proof.jailed
        if jailed is None or cancel.is_set() or proof.status == RunStatus.CANCELLED:
            return proof
        place = Place(where.uri, piece.first)
        if proof_only and (not jailed.available or jailed.tried):
            return held(proof, jailed.said() if jailed.tried else jailed.why)
        if not jailed.available:
            reason = (
                f"runfix has no jail for the model's code here ({jailed.why}). Run it in "
                "the kernel?"
            )
            confirmed = await self.gate.confirm_run(request.code, reason, where, place)
            return None if confirmed else held(proof, jailed.why)
        if jailed.tried:
            if await self.gate.allow_tried(where, request.code, jailed, place):
                return None  # (the guard lets it do what the user allowed)
            return held(proof, jailed.said())
        if not jailed.clean:  # (it hung, crashed or was interrupted there: that is its run)
            return proof
        return None if keep and proof.status == RunStatus.OK else proof

    async def _asked(self, where: Where, piece: Piece, code: str) -> RunOutcome | None:
        """Model-written code for a kernel runfix has no jail for (another language's, one
        without runfix's helper), asked about before it runs there: None once the user
        said to run it, else the outcome of code held."""
        name = where.language.name if where.language is not None else "this"
        why = f"runfix has no jail for {name} kernels"
        reason = f"{why}: run the model's code in your kernel as it is?"
        place = Place(where.uri, piece.first)
        if await self.gate.confirm_run(code, reason, where, place):
            return None
        return held(RunOutcome(RunStatus.ERROR, (), 0.0), why)

    async def run_code(
        self, where: Where, piece: Piece, cancel: asyncio.Event, origin: str
    ) -> PieceRun | None:
        """Lines `piece` of code in no open document (an agent's), admitted (its folder's
        trust was checked: nothing is asked), in the folder's kernel behind its runs,
        recorded and not kept. None: cancelled while queued. `ExecutorUnavailable`: nothing
        runs it here (not trusted, no kernel of its language)."""
        admitted = await self.gate.admit(where)
        if admitted is None:
            raise ExecutorUnavailable(f"{where.folder} is not trusted: nothing runs there")
        kernel, where = admitted.kernel, admitted.where
        lock = await self.locked(where, cancel)
        if lock is None:
            return None
        try:
            return await self.run(where, piece, kernel, cancel, origin=origin, keep=False)
        finally:
            lock.release()

    def shown(self, where: Where, outcome: RunOutcome, piece: Piece) -> None:
        """Keep the results of a run that ran elsewhere (a fix's attempt, now applied) on
        lines `piece` of `where.text`, in place of what those lines showed."""
        results = build(
            outcome,
            path=where.path,
            lines=where.text.lines,
            fallback_line=piece.first,
            folder=where.folder,
            piece=(piece.first, piece.last),
            files=output_files(where.folder, where.settings),
        )
        self.desk.replace(where.uri, where.text.version, piece.first, piece.last, results)

    async def quietly(
        self, kernel: Kernel, request: RunRequest, cancel: asyncio.Event | None = None
    ) -> RunOutcome:
        """runfix's own code in the kernel (the caller holds the folder's lock): nothing is
        shown or recorded."""
        return await kernel.execute(request, cancel=cancel)

    def _asker(self, where: Where, line: str) -> Callable[[str, bool], Awaitable[str | None]]:
        """The code's `input()` asked through the editor, within `inputTimeout`; meanwhile
        the runs queued behind it say what they wait for."""

        async def ask(prompt: str, password: bool) -> str | None:
            self.queue.doing(where.folder, f"it waits for input() at {line}")
            try:
                return await self.editor.ask_input(prompt, password, where.settings.input_timeout)
            finally:
                self.queue.doing(where.folder, None)

        return ask
