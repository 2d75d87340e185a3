"""One request traced in process, counting what the core's shape costs it (issue 48).

`sys.setprofile` sees every call into runfix's own code (`lsp_server/`, `executor/`) while
one request runs through the real core, with fakes only for the editor, the kernel and the
model. Per request it counts

- **R**, re-entries: a call into a module (a room) that already has a frame lower on the
  stack, from another one (A → B → A): a job calling back up into what called it;
- **K**, facts derived again after the request's context was made (`Flow.where`): the
  trust decision read, admission, the kernel's config — each beyond its first.

The stack is the logical one: a coroutine resumed by the event loop has the coroutine
that awaits it below it, as its frame's `f_back`; a resumed frame is not a new call.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ROOMS = (ROOT / "lsp_server", ROOT / "executor")

FACTS = {
    ("lsp_server/session.py", "Session.choice"): "the trust decision",
    ("lsp_server/services/gate.py", "Gate.admission"): "admission",
    ("lsp_server/executors.py", "kernel_config"): "the kernel's config",
}
"""The per-request facts: where each is derived (module, qualified name)."""
CONTEXT = ("lsp_server/flow.py", "Flow.where")
"""Where a request's context is made: what is derived inside it is the first derivation."""


@dataclass
class Trace:
    calls: int = 0
    reentries: list[str] = field(default_factory=list)
    """Each re-entry as `caller room → callee room (function)`."""
    facts: Counter[str] = field(default_factory=Counter)
    """How often each fact was derived outside the context's making."""
    in_context: Counter[str] = field(default_factory=Counter)

    @property
    def r(self) -> int:
        return len(self.reentries)

    @property
    def k(self) -> int:
        """Each fact's derivations beyond its first (the first may be the context's)."""
        return sum(
            max(0, self.facts[f] + self.in_context[f] - 1)
            for f in set(self.facts) | set(self.in_context)
        )


def _room(frame: FrameType) -> str | None:
    """The project module a frame runs in, relative to the repository; None elsewhere."""
    file = frame.f_code.co_filename
    for room in ROOMS:
        if file.startswith(str(room)):
            return str(Path(file).relative_to(ROOT))
    return None


def traced(make: Callable[[], Awaitable[Any]]) -> tuple[Any, Trace]:
    """Run the request `make` gives on a new event loop, traced; its answer and its Trace."""
    trace = Trace()
    seen: dict[int, FrameType] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        room = _room(frame)
        if room is None:
            return
        if id(frame) in seen and seen[id(frame)] is frame:
            return  # a coroutine resumed: not a new call
        seen[id(frame)] = frame
        trace.calls += 1
        name = frame.f_code.co_qualname
        fact = FACTS.get((room, name))
        below: list[tuple[str, str]] = []
        back = frame.f_back
        while back is not None:
            if (under := _room(back)) is not None:
                below.append((under, back.f_code.co_qualname))
            back = back.f_back
        if fact is not None:
            target = trace.in_context if CONTEXT in below else trace.facts
            target[fact] += 1
        if below and below[0][0] != room and any(r == room for r, _ in below[1:]):
            trace.reentries.append(f"{below[0][0]} → {room} ({name})")

    async def run() -> Any:
        sys.setprofile(profile)
        try:
            return await make()
        finally:
            sys.setprofile(None)

    answer = asyncio.run(run())
    return answer, trace
