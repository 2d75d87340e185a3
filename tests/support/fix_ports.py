"""The fix loop's ports (`fixing.Ports`) made of plain functions, for tests of the loop
alone: a scripted model, recorded runs, a yes or no to flagged code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from executor.events import RunOutcome, Variable
from executor.safety import Finding
from lsp_server.fix.fixcheck import Check
from lsp_server.fix.fixing import Asking, Target


async def _no_variables() -> list[Variable]:
    return []


async def _yes(code: str, findings: list[Finding]) -> bool:
    return True


@dataclass
class CalledPorts:
    """`ask` and `run` given; the kernel holds nothing, flagged code is confirmed, no
    evidence, no module fixed, nothing checked."""

    ask_with: Callable[[list[dict[str, str]], str, int, int], Awaitable[str]]
    run_with: Callable[[str, int], Awaitable[RunOutcome]]
    confirm_with: Callable[[str, list[Finding]], Awaitable[bool]] = _yes
    variables_with: Callable[[], Awaitable[list[Variable]]] = _no_variables
    fixes_modules: bool = False
    origin: str = "model"

    async def ask(self, messages: list[dict[str, str]], what: str, bound: int, asked: int) -> str:
        return await self.ask_with(messages, what, bound, asked)

    async def ask_many(self, asks: Sequence[Asking], what: str) -> list[list[str]]:
        """Each request's choices from `ask_with`, one call a choice (`asked`: its number)."""
        return [
            [
                await self.ask_with(ask.messages, f"{what} ({ask.how})", ask.bound, i)
                for i in range(ask.n)
            ]
            for ask in asks
        ]

    async def run(self, code: str, at: int, proof_only: bool = False) -> RunOutcome:
        return await self.run_with(code, at)

    async def variables(self) -> list[Variable]:
        return await self.variables_with()

    async def confirm(self, code: str, findings: list[Finding]) -> bool:
        return await self.confirm_with(code, findings)

    def report(self, message: str) -> None:
        pass

    async def evidence(self, ename: str, line: int) -> Mapping[str, Any] | None:
        return None

    async def redefine(self, target: Target, candidate: str) -> RunOutcome:
        raise AssertionError("no module is fixed here")

    async def define(self, code: str, at: int) -> RunOutcome:
        return await self.run_with(code, at)

    async def verify(self, candidate: str, target: Target) -> Check | None:
        return None
