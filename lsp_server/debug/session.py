"""One debug session (DAP) in a folder's kernel: the editor's DAP client on one side (through
`runfix dap` and the folder's socket), the kernel's own debugger (debugpy inside ipykernel)
on the other, and runfix's run in between.

runfix compiles every statement it runs under the document's own path and line numbers
(`_kernel_side`), so a breakpoint on a line of a percent file is set on that path and line
as they are, and hits in a function a cell defined in an earlier run; a module imported the
ordinary way is its own path. What runfix adds:

- a breakpoint on a line whose text changed since the kernel ran it is not set (the kernel
  holds the old code: it would stop on the old text), and says so;
- the cell is run by runfix (its results land in the editor as any run's, it is recorded),
  with no time limit while it is debugged;
- the Variables view is read by runfix's own inspector in the stopped frame (nothing of the
  user's code runs: no `__repr__`, no property), paged by `start` and `count`;
- "Debug this error" (`stopOnError`) stops at an exception raised in the folder's own code,
  not at the library-internal ones that are caught where they are raised;
- frames of runfix's helper and of the kernel's machinery are left out of the call stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from executor.base import ExecutorUnavailable
from executor.debugger import DebugUnavailable, KernelDebug
from lsp_server.commands import Call, dispatch
from lsp_server.contract import RUN, Range, RunArgs
from lsp_server.debug.breakpoints import Breakpoints, DebugError, Defined, name_of
from lsp_server.debug.postmortem import PostMortem
from lsp_server.debug.variables import Place, Ref, Variables
from lsp_server.debug.wire import CAPABILITIES, response
from lsp_server.editor import Editor
from lsp_server.flow import Flow
from lsp_server.runs import RunMode, Where
from lsp_server.text.cells import cell_at, split_cells

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], None]

NO_ERROR = (
    "the kernel holds no error now (none since it started, or a later run replaced it): "
    "Debug this error runs the cell again instead"
)
DEBUG_TIMEOUT = 7 * 24 * 3600.0
"""A debugged run's time limit: the user stops it (a stop at a breakpoint is not a hang)."""

_MACHINERY = ("/ipykernel/", "/IPython/", "/debugpy/", "/tornado/", "/asyncio/", "/zmq/")
"""Frames of these are the kernel's own, left out of the call stack the user sees."""


_MACHINE_THREAD = re.compile(
    r"^IPythonHistorySavingThread$|\(_watch_pipe_fd\)|^runfix-live$|^ipykernel-parent-poller$"
)
"""Threads of the kernel's own (their code is IPython's and ipykernel's) and runfix's (the
live features' reader)."""
_FRAME_LINE = re.compile(r'^\s*File "([^"]*)", line \d+')


class DebugSession:
    """A DAP client's session in `folder`'s kernel: `handle` each of its messages, `send`
    answers and events to it, `close` when it is gone."""

    def __init__(self, flow: Flow, editor: Editor, folder: Path, send: Send) -> None:
        self.flow, self.editor, self.folder = flow, editor, folder
        self._send = send
        self._seq = itertools.count(1)
        self.kernel: KernelDebug | None = None
        self.where: Where | None = None
        self._cell: tuple[int, int] | None = None
        """The debugged cell's lines (0-based, inclusive)."""
        self.breakpoints = Breakpoints(editor, folder)
        self.variables = Variables()
        self.post: PostMortem | None = None
        """A post-mortem session's answers (`postMortem`: the last error, nothing runs)."""
        self._stop_on_error = False
        self._run: asyncio.Task[None] | None = None
        self._defined_at: Defined | None = None
        """Asks the kernel where its functions were last defined (set at launch)."""
        self._cancel = asyncio.Event()
        self.ended = asyncio.Event()
        self._cells_prefix: str | None = None
        """Where the kernel files the cells it was sent (runfix's calls), from `debugInfo`."""
        self._error_kind: str | None = None
        """Under "Debug this error": the kind of error the cell last raised."""
        self._error_stopped: tuple[str, str] | None = None
        """The exception (kind, message) stopped at last under "Debug this error"."""
        self._trace: tuple[int, dict[str, Any]] | None = None
        """The stack trace fetched at the last stop (thread, its body), until it is asked."""

    # -- the wire ---------------------------------------------------------------------

    def _out(self, message: dict[str, Any]) -> None:
        self._send({**message, "seq": next(self._seq)})

    def event(self, name: str, body: dict[str, Any] | None = None) -> None:
        self._out({"type": "event", "event": name, **({"body": body} if body else {})})

    def _respond(self, request: dict[str, Any], body: Any = None, error: str | None = None) -> None:
        self._out(response(request, body, error))

    async def handle(self, message: dict[str, Any]) -> None:
        """One message of the client's: a request answered (an error said in its response,
        never raised)."""
        if message.get("type") != "request":
            return
        command = str(message.get("command", ""))
        arguments = message.get("arguments") or {}
        handler = getattr(self, f"_on_{command}", None)
        try:
            if self.post is not None and command in self.post.answers:
                self._respond(message, await self.post.answer(command, arguments))
            elif handler is not None:
                self._respond(message, await handler(arguments))
            else:
                self._respond(message, await self._forward(command, arguments))
        except (DebugError, DebugUnavailable, ExecutorUnavailable) as exc:
            self._respond(message, error=str(exc))
        except Exception as exc:  # one bad request never ends the session
            log.exception("the debug request %s failed", command)
            self._respond(message, error=f"{type(exc).__name__}: {exc}")

    async def _forward(self, command: str, arguments: dict[str, Any]) -> Any:
        """A request the kernel's debugger answers as it is (step, continue, evaluate …)."""
        answer = await self._kernel().request(command, arguments)
        if not answer.get("success", False):
            raise DebugError(str(answer.get("message") or f"{command} failed"))
        return answer.get("body")

    def _kernel(self) -> KernelDebug:
        if self.kernel is None:
            raise DebugError("launch first: no kernel is being debugged")
        return self.kernel

    # -- the session's course -----------------------------------------------------------

    async def _on_initialize(self, arguments: dict[str, Any]) -> Any:
        return CAPABILITIES

    async def _on_launch(self, arguments: dict[str, Any]) -> Any:
        program = arguments.get("program")
        line = arguments.get("line")
        if isinstance(line, str) and line.isdigit():  # (VS Code's `${lineNumber}` is text)
            line = int(line)
        if not isinstance(program, str) or not program:
            raise DebugError("program: the file (or notebook) whose cell to debug is needed")
        if not isinstance(line, int) or line < 1:
            raise DebugError("line: a line (from 1) of the cell to debug is needed")
        uri, _, above = self.breakpoints.document(program)
        line += above
        name = name_of(uri)
        if self.editor.text(uri) is None:
            raise DebugError(f"{name} is not open in the editor: open it to debug its cells")
        where = await self.flow.where(uri)
        if where.language is None:
            raise DebugError(f"runfix does not know {name}'s language: nothing to debug")
        kernel = await self.flow.open_kernel(where)
        self._defined_at = kernel.defined_at if kernel is not None else None
        if kernel is None:
            raise DebugError(
                f"{self.folder.name} is not trusted to run code yet: run a cell there first "
                "(the same question as any run), then debug"
            )
        if kernel.plain:  # another language's: its own sentence where it has no debugger
            (await kernel.debugger(lambda event: None)).close()
            raise DebugError(
                f"the {where.language.id} kernel has a debugger, but runfix maps breakpoints "
                "in Python cells only"
            )
        rows = where.text.lines
        if line > len(rows):
            raise DebugError(f"line: {name} has {len(rows)} lines")
        cell = cell_at(split_cells(rows, where.settings.prompt_markers), line - 1)
        assert cell is not None  # (every line is in a cell)
        self._cell = (cell.code_first, max(cell.code_first, cell.last))
        self._stop_on_error = bool(arguments.get("stopOnError"))
        if self._stop_on_error:
            self._error_kind = self._last_error(uri, self._cell)
        settings = dataclasses.replace(where.settings, timeout=DEBUG_TIMEOUT)
        self.where = dataclasses.replace(where, settings=settings)
        if arguments.get("postMortem"):  # the last error's frames, kept: nothing runs
            error = await kernel.last_error()
            if error is None:
                raise DebugError(NO_ERROR)
            names = sorted(settings.secret_names())
            self.post = PostMortem(
                kernel, error, self.breakpoints, self.variables, names, self.event
            )
            self.event("initialized")
            return None
        with contextlib.suppress(Exception):  # (nothing known: no line says it changed)
            self.breakpoints.ran = await kernel.debug_documents()
        self.breakpoints.debugged = (uri, *self._cell)
        self.kernel = await kernel.debugger(self._from_kernel)
        attach = await self.kernel.request(
            "initialize",
            {"clientID": "runfix", "adapterID": "python", "pathFormat": "path",
             "linesStartAt1": True, "columnsStartAt1": True},
        )  # fmt: skip
        if attach.get("success", False):
            attach = await self.kernel.request("attach", {"justMyCode": False})
        if not attach.get("success", False):
            raise DebugError(f"the kernel's debugger did not start: {attach.get('message', '')}")
        info = await self.kernel.request("debugInfo")
        self._cells_prefix = str((info.get("body") or {}).get("tmpFilePrefix") or "") or None
        if self._stop_on_error:
            self._filters = ["raised"]
            await self.kernel.request("setExceptionBreakpoints", {"filters": self._filters})
        self.event("initialized")
        return None

    def _last_error(self, uri: str, cell: tuple[int, int]) -> str | None:
        """The kind of error (`KeyError`) the cell's last run raised, as its problem says."""
        for problem in self.flow.results(uri).problems:
            inside = problem.piece is not None and cell[0] <= problem.piece[0] <= cell[1]
            if problem.severity == "error" and problem.kind == "run" and inside:
                kind = problem.message.split(":", 1)[0].strip().rsplit(".", 1)[-1]
                return kind if kind.isidentifier() else None
        return None

    async def _on_configurationDone(self, arguments: dict[str, Any]) -> Any:
        if self.where is None or self._cell is None:
            raise DebugError("launch first: no cell to debug")
        if self._run is None:
            self._run = asyncio.ensure_future(self._debugged_run())
        return None

    async def _debugged_run(self) -> None:
        """The cell, run by runfix under the debugger; the session ends when it does."""
        assert self.where is not None and self._cell is not None
        first, last = self._cell
        try:
            arg = RunArgs(self.where.uri, Range.lines(first, last))
            call = Call(arg, self._cancel, self.where, RunMode(origin="user"))
            answer = await dispatch(self.flow, RUN, call)
            said = answer.message or answer.status.value
            self.event("output", {"category": "console", "output": f"runfix: {said}\n"})
        except Exception as exc:
            log.exception("the debugged run failed")
            self.event("output", {"category": "stderr", "output": f"runfix: {exc}\n"})
        finally:
            self.flow.held_by(self.folder, None)
            await self._detach()
            self.event("terminated")

    async def _on_terminate(self, arguments: dict[str, Any]) -> Any:
        """Stop the debugged run: the kernel is interrupted (its state kept)."""
        self._cancel.set()
        await self._release()
        return None

    async def _on_disconnect(self, arguments: dict[str, Any]) -> Any:
        """The client leaves: breakpoints cleared and a stop resumed, so the run goes on to
        its end and the kernel keeps its state."""
        await self._release()
        await self._detach()
        self.ended.set()
        return None

    async def _release(self) -> None:
        """No breakpoint, no exception filter, nothing stopped: the run goes on to its end."""
        if self.kernel is None or self.kernel.closed:
            return
        with contextlib.suppress(Exception):
            for path in list(self.breakpoints.held):
                await self.kernel.request(
                    "setBreakpoints", {"source": {"path": path}, "breakpoints": []}
                )
            await self.kernel.request("setExceptionBreakpoints", {"filters": []})
            await self.kernel.request("continue", {"threadId": 1})

    async def _detach(self) -> None:
        kernel, self.kernel = self.kernel, None
        if kernel is None:
            return
        with contextlib.suppress(Exception):
            # (bounded: a kernel restarted under the session has no debugger to answer it)
            await kernel.request(
                "disconnect", {"restart": False, "terminateDebuggee": False}, within=3.0
            )
        kernel.close()

    async def close(self) -> None:
        """The client is gone without a word (its connection closed): as a disconnect."""
        await self._on_disconnect({})

    # -- breakpoints ----------------------------------------------------------------------

    async def _on_setExceptionBreakpoints(self, arguments: dict[str, Any]) -> Any:
        filters = [f for f in arguments.get("filters") or [] if f in ("raised", "uncaught")]
        if self._stop_on_error and "raised" not in filters:
            filters.append("raised")
        self._filters = filters
        if self.kernel is not None:
            await self._forward("setExceptionBreakpoints", {"filters": filters})
        return None

    # -- stops and frames -------------------------------------------------------------------

    def _from_kernel(self, event: dict[str, Any]) -> None:
        """An event of the kernel's debugger, passed on (the kernel's own chatter left out)."""
        name = event.get("event")
        if name in ("stopped", "continued"):
            self.variables.clear()
            self._trace = None
            stopped = "it is stopped in a debugger (runfix dap)" if name == "stopped" else None
            self.flow.held_by(self.folder, stopped)
        if name == "stopped":
            self.editor.spawn(self._stopped(event), "debug stop")
            return
        if name in ("continued", "thread", "output", "breakpoint"):
            body = dict(event.get("body") or {})
            if name == "output" and body.get("category") == "telemetry":
                return
            point = dict(body.get("breakpoint") or {})
            path, line = (point.get("source") or {}).get("path"), point.get("line")
            if isinstance(path, str) and isinstance(line, int):  # (moved or verified later)
                shown, point["line"] = self.breakpoints.shown_at(path, line)
                body["breakpoint"] = {**point, "source": {"path": shown, "name": name_of(shown)}}
            self.event(str(name), body)

    async def _stopped(self, event: dict[str, Any]) -> None:
        """A stop, said to the client; under "Debug this error", an exception raised outside
        the folder's own code (caught inside a library) is gone past."""
        body = event.get("body") or {}
        if self._stop_on_error and body.get("reason") == "exception" and self.kernel:
            thread = body.get("threadId", 1)
            with contextlib.suppress(Exception):
                if not await self._the_error(body):
                    await self.kernel.request("continue", {"threadId": thread})
                    return
        self.event("stopped", body)

    async def _the_error(self, body: dict[str, Any]) -> bool:
        """Whether an exception stop is the error being debugged, raised: of the kind the
        cell's last run raised (any kind where it did not), in the folder's own code, and
        not the same exception again on its way up (the debugger stops in each frame)."""
        assert self.kernel is not None
        kind = str(body.get("text") or "").rsplit(".", 1)[-1]
        if self._error_kind and kind != self._error_kind:
            return False
        said = (kind, str(body.get("description") or ""))
        if said == self._error_stopped:
            return False
        thread = body.get("threadId", 1)
        trace = await self.kernel.request("stackTrace", {"threadId": thread})
        frames = (trace.get("body") or {}).get("stackFrames") or []
        self._trace = (thread, trace.get("body") or {})  # (the client asks for it next)
        top = ((frames[0].get("source") or {}).get("path") or "") if frames else ""
        if not self._users(top):
            return False
        self._error_stopped = said
        return True

    def _users(self, path: str) -> bool:
        """A file of the folder's own code (not its environment's packages)."""
        if not path or path.startswith("<"):
            return False
        found = Path(path)
        if self.folder not in found.parents:
            return False
        inside = found.relative_to(self.folder).parts
        return not any(p in ("site-packages", "dist-packages", ".venv") for p in inside)

    async def _on_stackTrace(self, arguments: dict[str, Any]) -> Any:
        kept, self._trace = self._trace, None
        whole = not arguments.get("startFrame") and not arguments.get("levels")
        if kept is not None and kept[0] == arguments.get("threadId") and whole:
            body = kept[1]  # fetched at this stop already, to tell whether to stop
        else:
            body = await self._forward("stackTrace", arguments) or {}
        frames = [f for f in body.get("stackFrames") or [] if self._shown(f)]
        self.variables.seen(frames, first=not arguments.get("startFrame"))
        for frame in frames:
            source = frame.get("source") or {}
            if source.get("path") and isinstance(frame.get("line"), int):
                source["path"], frame["line"], source["name"] = self.breakpoints.frame_at(
                    source["path"], frame["line"]
                )
        return {"stackFrames": frames, "totalFrames": len(frames)}

    async def _on_exceptionInfo(self, arguments: dict[str, Any]) -> Any:
        """The exception as the kernel's debugger says it, its traceback text without the
        frames the call stack leaves out (runfix's helper, the kernel's own code)."""
        body = await self._forward("exceptionInfo", arguments) or {}
        details = body.get("details")
        if isinstance(details, dict) and isinstance(details.get("stackTrace"), str):
            details["stackTrace"] = self._users_trace(details["stackTrace"])
        return body

    def _users_trace(self, text: str) -> str:
        """A traceback's text without the frames `_shown` leaves out (each `File …` line and
        the source line under it)."""
        out: list[str] = []
        skipping = False
        for line in text.splitlines(keepends=True):
            found = _FRAME_LINE.match(line)
            if found is not None:
                skipping = not self._shown({"source": {"path": found.group(1)}})
            elif not line.startswith("    ") or not line.strip():
                skipping = False  # past a frame's source line: the error itself
            if not skipping:
                out.append(line)
        return "".join(out)

    async def _on_threads(self, arguments: dict[str, Any]) -> Any:
        """The threads but the kernel's own (IPython's history saver, its pipe watchers)."""
        body = await self._forward("threads", arguments) or {}
        threads = body.get("threads") or []
        mine = [t for t in threads if not _MACHINE_THREAD.search(str(t.get("name", "")))]
        return {"threads": mine}

    def _shown(self, frame: dict[str, Any]) -> bool:
        path = str((frame.get("source") or {}).get("path") or "")
        if not path or path.startswith("<"):
            return False  # runfix's helper (made from a string), the kernel's own code
        if self._cells_prefix and path.startswith(self._cells_prefix):
            return False  # the kernel's cell of runfix's call (`_runfix_kernel.run(…)`)
        return not any(part in path for part in _MACHINERY)

    # -- variables, read by runfix ----------------------------------------------------------

    # -- breakpoints and variables (`breakpoints`, `variables`) -----------------------------

    async def _on_setBreakpoints(self, arguments: dict[str, Any]) -> Any:
        forward = self._forward if self.kernel is not None else None
        # Where its functions were last defined, asked of the kernel only while it is idle
        # (before the debugged cell runs: a question queued behind a stop would wait).
        idle = self._run is None and self.post is None
        defined = self._defined_at if idle else None
        return await self.breakpoints.set(arguments, forward, defined)

    async def _on_scopes(self, arguments: dict[str, Any]) -> Any:
        return self.variables.scopes(arguments)

    async def _on_variables(self, arguments: dict[str, Any]) -> Any:
        return await self.variables.page(arguments, self._read)

    async def _read(self, ref: Ref, where: Place, start: int, count: int) -> dict[str, Any]:
        """A page of `ref`, read by runfix's inspector in the stopped frame `where`."""
        names = sorted(self.where.settings.secret_names()) if self.where else []
        page = (where, ref.scope, ref.path, start, count, names)
        return await self._kernel().frame_page(ref.frame, page)
