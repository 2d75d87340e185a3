"""A post-mortem view of the kernel's last error (`launch` with `postMortem`): its frames in
the user's code and their variables, as a debugger's stopped thread, without running the
cell again — the traceback the kernel keeps (`sys.last_traceback`) is read by runfix's
inspector, and nothing of the user's code runs. Nothing steps: the code has ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lsp_server.debug.breakpoints import Breakpoints, DebugError
from lsp_server.debug.variables import Place, Ref, Variables

THREAD = 1
ENDED = (
    "post-mortem: the code has ended, and nothing runs here; Debug this error runs the cell "
    "again to step"
)
"""What a step, an evaluation or a breakpoint gets in a post-mortem session."""


class PostMortem:
    """The kernel's last error, answered as a stopped thread."""

    def __init__(
        self,
        kernel: Any,
        error: dict[str, Any],
        places: Breakpoints,
        variables: Variables,
        names: list[str],
        event: Callable[[str, dict[str, Any] | None], None],
    ) -> None:
        self.kernel, self.error = kernel, error
        self.places, self.variables, self.names = places, variables, names
        self.event = event

    async def answer(self, command: str, arguments: dict[str, Any]) -> Any:
        """The response's body to a request of a post-mortem session."""
        if command == "configurationDone":
            error, kind = self.error["error"], self.error["kind"]
            self.event("stopped", {"reason": "exception", "threadId": THREAD,
                                   "description": error, "text": kind,
                                   "allThreadsStopped": True})  # fmt: skip
            return None
        if command == "threads":
            return {"threads": [{"id": THREAD, "name": "the last error (post-mortem)"}]}
        if command == "stackTrace":
            return self._stack()
        if command == "variables":
            return await self.variables.page(arguments, self._read)
        if command == "exceptionInfo":
            description = self.error["error"]
            return {"exceptionId": self.error["kind"], "description": description,
                    "breakMode": "always"}  # fmt: skip
        if command == "setBreakpoints":
            wanted = arguments.get("breakpoints") or []
            return {"breakpoints": [{"verified": False, "message": ENDED} for _ in wanted]}
        if command in ("setExceptionBreakpoints", "setFunctionBreakpoints"):
            return None
        if command == "continue":
            self.event("terminated", None)
            return {"allThreadsContinued": True}
        raise DebugError(ENDED)

    answers = frozenset(
        ("configurationDone", "threads", "stackTrace", "variables", "exceptionInfo",
         "setBreakpoints", "setExceptionBreakpoints", "setFunctionBreakpoints", "continue",
         "next", "stepIn", "stepOut", "stepBack", "goto", "pause", "evaluate", "setVariable",
         "restartFrame", "reverseContinue")
    )  # fmt: skip
    """The requests this answers (the rest: the session's own, as in any session)."""

    def _stack(self) -> dict[str, Any]:
        raw = [
            {"id": n, "name": name, "line": line, "column": 1, "source": {"path": path}}
            for n, (path, name, line) in enumerate(self.error["frames"], 1)
        ]
        self.variables.seen(raw, first=True)
        frames = []
        for frame in raw:
            path, line, name = self.places.frame_at(frame["source"]["path"], frame["line"])
            frames.append({**frame, "line": line, "source": {"path": path, "name": name}})
        return {"stackFrames": frames, "totalFrames": len(frames)}

    async def _read(self, ref: Ref, where: Place, start: int, count: int) -> dict[str, Any]:
        page = (where, ref.scope, ref.path, start, count, self.names)
        said: dict[str, Any] = await self.kernel.last_error_page(page)
        return said
