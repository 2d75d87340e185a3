"""`runfix mcp`: an MCP server over stdio for coding agents, sharing the editor's kernel.

Each tool names its file or folder; the call goes to the `runfix serve` that holds that
folder, over its local socket (`lsp_server/folder_socket.py`), so the agent's runs use the
user's kernel, queue behind the user's runs, land inline in the open file and are
recorded as the agent's; the user allows them in the editor. With no editor holding the
folder, `runfix mcp` serves it itself (`_Alone`). There is no "current notebook": two
agents, or one agent in two folders, never share anything but what they name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import sys
from pathlib import Path
from textwrap import dedent
from typing import Any

from executor.base import ExecutorUnavailable
from lsp_server import __version__
from lsp_server.agents import AgentDoor, local_path, until_gone
from lsp_server.cli.mcp_wire import Call, McpServer, Param, Tool, ToolError
from lsp_server.folder_socket import (
    LINE_LIMIT,
    AgentError,
    connect,
    held_folder,
)

_IDS = itertools.count(1)

INSTRUCTIONS = """\
runfix runs Python in the kernel the user's editor uses for a folder: what the user ran
is defined there, and what you run is seen by the user inline in their file. Runs wait
for the user's runs, and the user allows them in the editor. Name files by path; lines
start at 1."""


def _project_of(path: Path) -> Path:
    """The folder `runfix mcp` serves alone for `path`: its project, as `runfix run` finds
    it (the same run record, settings and kernel folder)."""
    from lsp_server.cli.run import project_folder  # (the server alone loads the rest too)

    return project_folder(Path(os.path.abspath(path)))


class _Alone:
    """A folder no editor holds: `runfix mcp` serves it itself, with the same settings,
    trust decisions and run record as an editor's server. Nobody is there to allow the
    agent's runs: the folder's trust (decided before, in an editor or with `runfix trust`)
    is the user's word."""

    def __init__(self, folder: Path) -> None:
        from lsp_server.cli.run import HeadlessEditor
        from lsp_server.flow import Flow
        from lsp_server.session import Session
        from lsp_server.settings import Settings, folder_settings

        async def read_settings(where: Path) -> Settings:
            return folder_settings(where, None)[0]

        # Its notes go to stderr: stdout carries the MCP messages.
        editor = HeadlessEditor(str(folder), folder / "<agent>", folder, [], out=sys.stderr)
        editor.report = "json"  # nothing printed as it runs
        self.session = Session(read_settings, editor.kernel_state)
        flow = Flow(self.session, editor)
        flow.allow_agents(folder)
        self.door = AgentDoor(editor, flow)

    async def close(self) -> None:
        self.door.cancel_all()
        await self.door.flow.close()


_ALONE: dict[Path, _Alone] = {}


async def call(path: str, op: str, args: dict[str, Any], agent: str) -> dict[str, Any]:
    """One call of `agent` to the `runfix serve` holding `path`'s folder; its answer. What
    went wrong is a ToolError: the agent reads its message."""
    try:
        local = local_path(path)
        if args.get("path") == path:
            args = {**args, "path": local}
        answer = await _call(local, op, args, agent)
    except (AgentError, ExecutorUnavailable) as exc:  # (no kernel here: how to get one)
        raise ToolError(str(exc)) from None
    return answer if isinstance(answer, dict) else {"result": answer}


class _NoServer(Exception):
    """Nobody listens on the folder's socket any more."""


class _Connection:
    """One open connection to the socket of the `runfix serve` holding a folder, reused by
    every call (calls take turns: one answer per call, in order)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lock = asyncio.Lock()
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        async with self.lock:
            for attempt in (1, 2):  # a connection the server closed meanwhile: once more
                if self.streams is None:
                    try:
                        self.streams = await connect(self.folder)
                    except (ConnectionRefusedError, FileNotFoundError):
                        raise _NoServer from None  # a socket a server that died left
                    except OSError as exc:
                        raise AgentError(
                            f"the editor's runfix for {self.folder} does not answer: {exc}"
                        ) from None
                reader, writer = self.streams
                try:
                    writer.write(json.dumps(message).encode() + b"\n")
                    await writer.drain()
                    answer = await self._answer_to(reader, message.get("id"))
                except (ConnectionError, OSError):
                    answer = None
                except ValueError:  # a line over the limit: the stream is not whole any more
                    self.close()
                    raise AgentError(
                        "the editor's answer could not be read (over the limit, or not JSON)"
                    ) from None
                except BaseException:  # the agent gave up on the call: its answer is not read
                    self.close()  # by the next one (a new connection starts in step)
                    raise
                if answer is not None:
                    return answer
                self.close()
                if attempt == 2 or message.get("op") in ("run", "code"):
                    break  # a run is never sent twice
            raise AgentError(f"the editor's runfix for {self.folder} stopped before it answered")

    @staticmethod
    async def _answer_to(reader: asyncio.StreamReader, asked: Any) -> dict[str, Any] | None:
        """The answer to the call `asked` (one left unread by an earlier call is skipped);
        None when the server closed the connection."""
        while line := await reader.readline():  # the server answers every call
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == asked:
                return answer
        return None

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


_CONNECTIONS: dict[Path, _Connection] = {}


async def _call(path: str, op: str, args: dict[str, Any], agent: str) -> Any:
    message = {"id": next(_IDS), "op": op, "args": args, "agent": agent}
    if (why := _missing(path)) is not None:  # never a folder above it served instead
        raise AgentError(why)
    folder = await held_folder(Path(path))
    if folder is not None:
        connection = _CONNECTIONS.get(folder)
        if connection is None:
            connection = _CONNECTIONS[folder] = _Connection(folder)
        with contextlib.suppress(_NoServer):
            answer = await connection.ask(message)
            if "error" in answer:
                raise AgentError(str(answer["error"]))
            return answer.get("result")
    # No editor holds the folder: served here.
    folder = _project_of(Path(path))
    alone = _ALONE.get(folder)
    if alone is None and (
        old := next(filter(None, (a.door.was(folder) for a in _ALONE.values())), None)
    ):
        raise AgentError(
            f"{folder} is {old}, moved or renamed while runfix served it; nothing was run. "
            "Start the agent again to work in it where it is now."
        )
    if alone is None:
        alone = _ALONE[folder] = _Alone(folder)
    # A call the agent cancels cancels its run (the kernel interrupted), as an editor's does.
    never = asyncio.get_running_loop().create_future()
    try:
        return await until_gone(alone.door.handle(folder, message), never)
    finally:
        never.cancel()


def _missing(path: str) -> str | None:
    """Why `path` cannot be served: it is not there (its folder moved, as a folder this
    server served, or it never was)."""
    if os.path.lexists(path):
        return None
    there = Path(os.path.abspath(path))
    known = [f for f in (*_CONNECTIONS, *_ALONE) if f == there or f in there.parents]
    if known and not known[0].exists():
        return (
            f"{known[0]} is not where it was: it was moved, renamed or deleted while runfix "
            "served it, and nothing was run. Call with its new path."
        )
    return f"{path} does not exist"


async def _run_lines(args: dict[str, Any], agent: str) -> dict[str, Any]:
    path, first, last = args["path"], args["first"], args["last"]
    asked = {"path": path, "first": first, "last": last if last is not None else first}
    return await call(path, "run", asked, agent)


async def _run_cell(args: dict[str, Any], agent: str) -> dict[str, Any]:
    path, line, cell = args["path"], args["line"], args["cell"]
    if cell is not None:
        return await call(path, "run", {"path": path, "cell": cell}, agent)
    if line is None:
        raise ToolError("run_cell: the line (from 1) of the cell, or a notebook's `cell`")
    return await call(path, "run", {"path": path, "line": line}, agent)


async def _run_file(args: dict[str, Any], agent: str) -> dict[str, Any]:
    return await call(args["path"], "run", {"path": args["path"]}, agent)


async def _run_code(args: dict[str, Any], agent: str) -> dict[str, Any]:
    return await call(args["folder"], "code", {"code": args["code"]}, agent)


async def _results(args: dict[str, Any], agent: str) -> dict[str, Any]:
    return await call(args["path"], "results", args, agent)


async def _variables(args: dict[str, Any], agent: str) -> dict[str, Any]:
    return await call(args["folder"], "variables", {}, agent)


async def _inspect(args: dict[str, Any], agent: str) -> dict[str, Any]:
    return await call(args["folder"], "inspect", {"expression": args["expression"]}, agent)


async def _history(args: dict[str, Any], agent: str) -> dict[str, Any]:
    limit = args["limit"] if args["limit"] is not None else 20
    return await call(args["path"], "history", {"path": args["path"], "limit": limit}, agent)


async def _interrupt(args: dict[str, Any], agent: str) -> dict[str, Any]:
    return await call(args["folder"], "interrupt", {}, agent)


NUMBERS = ("line", "first", "last", "cell", "limit")
"""The tools' integer arguments (line numbers, a count); the others are strings."""


def _tool(name: str, params: str, read_only: bool, work: Call, description: str) -> Tool:
    """A tool taking `params` ("path first last?": `?` marks an optional one)."""
    taken = []
    for word in params.split():
        param = word.rstrip("?")
        kind: type[str] | type[int] = int if param in NUMBERS else str
        taken.append(Param(param, kind, required=not word.endswith("?")))
    return Tool(name, dedent(description).strip(), tuple(taken), read_only, work)


TOOLS = (
    _tool(
        "run_lines",
        "path first last?",
        False,
        _run_lines,
        """
        Run lines `first`..`last` (from 1; `last` defaults to `first`) of a file in the
        folder's kernel of its language (Python's, R's, …): the editor's text if the file is
        open there (its results show inline), else the file on disk. Answers status and
        output.""",
    ),
    _tool(
        "run_cell",
        "path line? cell?",
        False,
        _run_cell,
        """
        Run the whole cell (`# %%`) holding `line` (from 1) of a file, as `run_lines`; or,
        in a notebook (.ipynb), its cell number `cell` (from 1, as the notebook numbers its
        cells: `runfix run NB.ipynb` says `NB.ipynb:cell 3:…`).""",
    ),
    _tool(
        "run_file",
        "path",
        False,
        _run_file,
        """
        Run a whole file (in its language's kernel), cell by cell, stopping at the first
        that fails.""",
    ),
    _tool(
        "run_code",
        "folder code",
        False,
        _run_code,
        """
        Run a snippet in the folder's kernel without writing it anywhere (to look at data
        the user loaded, try an idea). Answers status and output.""",
    ),
    _tool(
        "results",
        "path first? last?",
        True,
        _results,
        """
        What the runs left on a file's lines (`first`..`last`, from 1; all by default):
        each statement's output (and whether code above it changed since), and the
        errors.""",
    ),
    _tool(
        "variables",
        "folder",
        True,
        _variables,
        """
        The names the folder's kernel holds: type, shape or length, a table's columns.""",
    ),
    _tool(
        "inspect_value",
        "folder expression",
        True,
        _inspect,
        """
        One value of the kernel (a name, `a.b`, `d["k"]`): type, shape, columns, preview,
        signature and doc. Reads it without running any of its code.""",
    ),
    _tool(
        "history",
        "path limit?",
        True,
        _history,
        """
        The latest runs (newest first) of a file, or of a folder's files, from its run
        record: who ran them (the user, an agent, a fix), the code, how they ended,
        output.""",
    ),
    _tool(
        "interrupt",
        "folder",
        False,
        _interrupt,
        """
        Interrupt what the folder's kernel is running (the state stays).""",
    ),
)


MAX_DEPTH = 100
"""The deepest nesting of arrays and objects a message may have (the SDK's parser gives up
somewhere below 200, and then nothing answers the call)."""
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,200}")')


def _depth(value: Any) -> int:
    """How deeply `value` (parsed JSON) nests arrays and objects; without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            todo.extend((child, depth + 1) for child in item)
    return deepest


class _Incoming:
    """The agent's messages on stdin, read on the event loop, each parsed. A line runfix
    will not take — over `LINE_LIMIT`, not JSON, nested deeper than `MAX_DEPTH` — is
    answered here with an error (to its id where it can be read) and dropped: the
    connection stays."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def __aiter__(self) -> _Incoming:
        return self

    async def __anext__(self) -> Any:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                if not end.partial:
                    raise StopAsyncIteration from None
                line = end.partial
            except asyncio.LimitOverrunError as over:
                head = await self.reader.readexactly(over.consumed)
                await self._drop_rest()
                limit = f"{LINE_LIMIT // 2**20} MiB"
                self._refuse(head, -32600, f"runfix mcp: a message over {limit} was refused")
                continue
            if not line.strip():
                continue
            try:
                return self._parsed(line)
            except _Unfit as unfit:
                self._refuse(line, unfit.code, str(unfit))

    async def _drop_rest(self) -> None:
        """Read and drop the rest of an over-long line, up to its newline."""
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as over:
                await self.reader.readexactly(over.consumed)
            except asyncio.IncompleteReadError:
                return

    @staticmethod
    def _parsed(line: bytes) -> Any:
        """The message a line holds; `_Unfit` says why it is not taken."""
        try:
            message = json.loads(line)
        except RecursionError:
            raise _Unfit(
                -32600, f"runfix mcp: a message nested over {MAX_DEPTH} deep was refused"
            ) from None
        except ValueError as exc:
            raise _Unfit(
                -32700, f"runfix mcp: a message that is not JSON was refused ({exc})"
            ) from None
        if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _depth(message) > MAX_DEPTH:
            raise _Unfit(-32600, f"runfix mcp: a message nested over {MAX_DEPTH} deep was refused")
        return message

    def _refuse(self, line: bytes, code: int, message: str) -> None:
        found = _ID.search(line[:4096])
        ident = json.loads(found.group(1)) if found else None
        error = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
        self.writer.write(json.dumps(error).encode() + b"\n")


class _Unfit(Exception):
    """A line that is not taken, with the JSON-RPC error code that says why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def _serve_stdio() -> None:
    """MCP over this process's stdin and stdout, which are kept for the MCP messages only:
    from here on fd 0 reads nothing and fd 1 goes to stderr, so that nothing else (a
    library's print, a child process) writes into the wire."""
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    server = McpServer("runfix", __version__, INSTRUCTIONS, TOOLS, writer.write)
    try:
        await server.serve(_Incoming(reader, writer))
        with contextlib.suppress(ConnectionError):
            await writer.drain()  # the last answers, before the process ends
    finally:  # the kernels of the folders served alone stop with `runfix mcp`
        for alone in list(_ALONE.values()):
            await alone.close()
        _ALONE.clear()


def command(args: argparse.Namespace) -> int:
    asyncio.run(_serve_stdio())
    return 0
