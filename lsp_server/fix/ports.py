"""What one fix's loop (`fixing.Fixer`) asks of the world, declared in one place: the model
(`ask`), the user (`confirm`, `report`), the folder's kernel (`run`, and `redefine` or
`define` before it: the candidate and its test run in one jail), the kernel's state
(`variables`, `evidence`) and the check against the cells that depend on the fixed one
(`verify`). The loop calls down into these; none of them calls back into the
fix flow that made them, so the loop's calls are declared ports, not re-entries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from executor.base import ExecutorUnavailable
from executor.events import Guard, RunOutcome, RunRequest, RunStatus, Variable
from executor.jupyter import Kernel
from executor.pool import create as create_kernel
from executor.safety import Finding, describe
from lsp_server.editor import Editor, Place, Progress, Snapshot, streamed
from lsp_server.executors import kernel_config
from lsp_server.fix.fixcheck import Check, budget_for, plan, worth_comparing
from lsp_server.fix.fixcheck import check as check_against
from lsp_server.fix.fixing import RETRY_TEMPERATURE, Asking, Target, redefinition
from lsp_server.fix.in_place import module_with
from lsp_server.model.client import ModelClient, ModelError
from lsp_server.record.store import Asked
from lsp_server.runs import Piece, Where
from lsp_server.services.gate import Gate
from lsp_server.services.runner import Before, Runner, run_request
from lsp_server.session import Session
from lsp_server.text.languages import is_python

CHECK_HISTORY = 500
"""Recorded runs of a file read for its cells' last outcomes (the fix check)."""


def retry_temperature(setting: float | None) -> float:
    """The temperature of a request asked again (a retry must not give the same answer)."""
    return max(setting or 0.0, RETRY_TEMPERATURE)


@dataclass
class FixPorts:
    """The services one fix of lines of `where.text` from `first` uses, as its loop's ports."""

    where: Where
    first: int
    progress: Progress
    cancel: asyncio.Event
    session: Session
    editor: Editor
    gate: Gate
    runner: Runner
    model: ModelClient
    read_variables: Callable[[Where], Awaitable[list[Variable]]]
    read_evidence: Callable[[Where, str, int], Awaitable[Mapping[str, Any] | None]]
    fix_of: int | None = None
    asked: list[Asked] = field(default_factory=list)
    """What asking for the candidate about to run took (its run's record keeps it)."""
    fixes_modules: bool = True
    """A module file's candidate is put into its module in the kernel (`redefine`)."""
    origin: str = "model"
    """Who wrote what `run` runs ("offline": a fix read from the error; `Ports.origin`)."""
    before: list[Before] = field(default_factory=list)
    """What `redefine` or `define` put in place for the next `run`, which runs it first."""

    @property
    def place(self) -> Place:
        return Place(self.where.uri, self.first)

    async def ask(self, messages: list[dict[str, str]], what: str, bound: int, asked: int) -> str:
        model = self.model
        reading = model.prompt_tokens(messages)
        self.progress.report(f"{what}: the model is reading the prompt (~{reading:,} tokens)")
        self.asked.clear()
        reply = await model.complete(
            messages,
            on_text=streamed(self.progress, what),
            cancel=self.cancel,
            max_tokens=bound,
            temperature=retry_temperature(model.config.temperature) if asked else None,
            seed=(model.config.seed or 0) + asked if asked else None,
        )
        self.asked[:] = [model.last_asked] if model.last_asked is not None else []
        return reply

    async def ask_many(self, asks: Sequence[Asking], what: str) -> list[list[str]]:
        model = self.model
        reading = sum(model.prompt_tokens(ask.messages) for ask in asks)
        self.progress.report(f"{what}: the model is reading the prompts (~{reading:,} tokens)")
        self.asked.clear()
        got, failed = await ask_at_once(model, asks, self.cancel)
        if failed and not any(got):
            raise failed[0]
        self.asked[:] = [model.last_asked] if model.last_asked is not None else []
        return got

    async def confirm(self, code: str, findings: list[Finding]) -> bool:
        reason = f"The model's fix {describe(findings)}."
        return await self.gate.confirm_run(code, reason, self.where, self.place)

    def report(self, message: str) -> None:
        self.progress.report(message)
        self.editor.remark(self.place, f"fixing, {message}")

    async def variables(self) -> list[Variable]:
        return await self.read_variables(self.where)

    async def evidence(self, ename: str, line: int) -> Mapping[str, Any] | None:
        return await self.read_evidence(self.where, ename, line)

    async def run(self, code: str, at: int, proof_only: bool = False) -> RunOutcome:
        """A candidate runs where it would stand (line `at`); it is recorded as the model's
        run there, and its results are not kept (an attempt shows in the document only once
        applied). `proof_only`: in the jail or not at all, nothing asked."""
        before, self.before = tuple(self.before), []
        return await attempt_run(
            self.gate, self.runner, self.where, code, at, self.cancel, origin=self.origin,
            fix_of=self.fix_of, model=self.asked.pop() if self.asked else None, before=before,
            line=self.first, proof_only=proof_only,
        )  # fmt: skip

    async def redefine(self, target: Target, candidate: str) -> RunOutcome:
        """A module file's candidate, to be put into that module (and the names the user's
        namespace took from it rebound) where the next `run` runs, before it: what the file
        will say once fixed. One that does not compile is the attempt's error."""
        assert target.path is not None
        path, lines = str(target.path), target.lines
        _, failed = module_with(path, lines, target.first, target.last, candidate)
        if failed is not None:
            return failed
        code = redefinition(str(target.path), target.first, candidate)
        self.before = [(code, "<runfix>", 1)]
        return RunOutcome(RunStatus.OK, (), 0.0)

    async def define(self, code: str, at: int) -> RunOutcome:
        """A candidate for another cell, to run at line `at` where the next `run` runs,
        before it (in the same jail: what it defines is there for its test)."""
        self.before = [(code, self.where.path, at + 1)]
        return RunOutcome(RunStatus.OK, (), 0.0)

    async def verify(self, candidate: str, target: Target) -> Check | None:
        settings = self.where.settings
        if not settings.fix_check_dependents or target.path is not None:
            return None
        if not is_python(self.where.language):
            return None  # which cells depend on one is known for Python only
        self.progress.report("checking the cells that depend on it, in a throwaway kernel")
        checked = await check_fix(
            self.session, self.where, target.first, target.last, candidate, self.cancel,
            self.gate.guard_for(self.where, candidate),
        )  # fmt: skip
        if checked.status == "checked" and not checked.verdicts:
            return None  # no cell depends on it: nothing to say
        self.editor.remark(self.place, f"fix candidate: {checked.label}")
        return checked


async def ask_at_once(
    model: ModelClient, asks: Sequence[Asking], cancel: asyncio.Event
) -> tuple[list[list[str]], list[ModelError]]:
    """Each request's answers, asked at once (`Asking.n` choices each, at its temperature):
    a request that failed has none, and its error is kept; ModelCancelled (or anything but
    a model's error) is raised."""
    answers = await asyncio.gather(
        *(
            model.complete_many(
                ask.messages, ask.n, cancel=cancel, max_tokens=ask.bound,
                temperature=ask.temperature,
            )
            for ask in asks
        ),
        return_exceptions=True,
    )  # fmt: skip
    got: list[list[str]] = []
    failed: list[ModelError] = []
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, ModelError):
            raise answer  # (ModelCancelled too)
        if isinstance(answer, ModelError):
            failed.append(answer)
        got.append(answer if isinstance(answer, list) else [])
    return got, failed


async def attempt_run(
    gate: Gate,
    runner: Runner,
    where: Where,
    code: str,
    at: int,
    cancel: asyncio.Event,
    *,
    origin: str = "model",
    fix_of: int | None = None,
    model: Asked | None = None,
    before: tuple[Before, ...] = (),
    line: int | None = None,
    proof_only: bool = False,
) -> RunOutcome:
    """The model's `code` run where it would stand in `where`'s document (line `at`), in the
    folder's kernel behind its other runs — in a jail where the kernel has one (`origin`
    "model": `runner.jail_for`) — recorded as an attempt whose results are not kept.
    `proof_only`: in the jail or not at all, nothing asked (`Runner.run`)."""
    rows = code.splitlines(keepends=True)
    attempt = where.now(Snapshot(where.text.version, ("",) * at + tuple(rows)))
    piece = Piece(at, at + len(rows) - 1)

    async def attempted(kernel: Kernel, admitted: Where) -> RunOutcome:
        ran = await runner.run(
            replace(attempt, settings=admitted.settings), piece, kernel, cancel, origin=origin,
            keep=False, fix_of=fix_of, model=model, before=before, proof_only=proof_only,
        )  # fmt: skip
        return ran.outcome

    return await in_kernel(gate, runner, where, cancel, attempted, at if line is None else line)


async def in_kernel(
    gate: Gate,
    runner: Runner,
    where: Where,
    cancel: asyncio.Event,
    work: Callable[[Kernel, Where], Awaitable[RunOutcome]],
    line: int | None = None,
) -> RunOutcome:
    """`work` in the folder's kernel (admitted: said at `line` where it may not run), behind
    its other runs; why not, as a cancelled outcome's note."""
    try:
        admitted = await gate.admit(where, line)
    except ExecutorUnavailable as exc:
        return RunOutcome(RunStatus.CANCELLED, (), 0.0, note=str(exc))
    if admitted is None:
        return RunOutcome(RunStatus.CANCELLED, (), 0.0, note="the folder is not trusted")
    lock = await runner.locked(admitted.where, cancel)
    if lock is None:
        return RunOutcome(RunStatus.CANCELLED, (), 0.0, note="cancelled before it ran")
    try:
        return await work(admitted.kernel, admitted.where)
    finally:
        lock.release()


async def check_fix(
    session: Session,
    where: Where,
    first: int,
    last: int,
    candidate: str,
    cancel: asyncio.Event,
    guard: Guard | None = None,
) -> Check:
    """Run `candidate` in place of lines first..last, after the cells above, then the cells
    that depend on its cell, in a throwaway kernel; compare them with their last runs. The
    candidate runs under `guard` (the model's code)."""
    folder, path, settings = where.folder, where.path, where.settings
    record = session.existing_record(folder, settings)
    recorded = worth_comparing(record.recent(path, CHECK_HISTORY) if record else [])
    planned = plan(where.text.lines, first, last, candidate, recorded)
    if planned is None:
        return Check("checked")
    budget = budget_for(planned.seconds, settings.fix_check_budget)
    admitted = where.admission.kernel
    # The request's kernel's config where it was admitted (not derived again).
    config = admitted.config if admitted is not None else kernel_config(folder, settings)

    def make() -> Kernel:
        return create_kernel(
            folder, config, grace=settings.interrupt_grace,
            startup_timeout=settings.kernel_start_timeout,
        )  # fmt: skip

    def request(code: str, where: str, line: int) -> RunRequest:
        return run_request(settings, where, code, line)

    above, fixed, dependents = planned.above, planned.fixed, planned.dependents
    jailed = where.language is not None and where.language.python  # (runfix's helper: Python)
    return await check_against(
        make, path, above, fixed, dependents, budget, request, cancel, guard, jailed
    )
