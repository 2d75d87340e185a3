"""Coding agents share the editor's kernel (`runfix mcp`): the door `runfix serve` opens for
them, one local socket per workspace folder in the user's private runtime folder
(`lsp_server.folder_socket`).

An agent's call comes as one JSON line naming its operation, its folder or file and the
agent (the MCP client's name); the answer is one JSON line. Runs go through the same
`Flow` as the editor's: they queue behind the user's on the folder's run lock, land
inline in the open document, are recorded with origin `agent: <name>`, and stop with the
editor's interrupt. Nothing runs before the user allowed agents in that folder, in the
editor (once, or for this session), nor in a folder that is not trusted; an agent's run
cannot ask for `input()` (it fails at once: nobody at the editor is waiting for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from executor.base import ExecutorUnavailable
from executor.events import Display, Error, RunOutcome, Stream, Value
from executor.redact import Hider, secret_name
from executor.text import split_lines
from executor.trust import Choice
from lsp_server.commands import Call, dispatch
from lsp_server.contract import RUN, Range, RunArgs
from lsp_server.editor import Editor, Snapshot
from lsp_server.flow import Flow
from lsp_server.folder_files import read_regular
from lsp_server.folder_socket import (
    DAP_HELLO,
    LINE_LIMIT,
    STAND_BY,
    AgentError,
    answers,
    identity,
    socket_path,
)
from lsp_server.record.notebooks import read_notebook
from lsp_server.record.store import one_based
from lsp_server.runs import Piece, RunMode, Where
from lsp_server.settings import Settings
from lsp_server.text.cells import cell_at, split_cells
from lsp_server.text.languages import PYTHON, Language, language_of
from lsp_server.text.notebooks import MARKER, Notebook

log = logging.getLogger(__name__)

RESULTS_LIMIT = 4 * 1024 * 1024
"""Characters of output one `results` answer holds (the rest is counted, not sent)."""
FILE_LIMIT = 8 * 1024 * 1024
"""Bytes of a file an agent's `run_file` reads from disk."""
NAME_LIMIT = 60
"""Characters of an agent's name shown and recorded."""


def agent_name(raw: Any) -> str:
    """The name an agent gave, as it may be shown and recorded: one line of printable text,
    bounded (a name holding a newline or "runfix: …" must not read as runfix's own words)."""
    text = "".join(ch if ch.isprintable() else " " for ch in str(raw or ""))
    text = " ".join(text.split())
    if len(text) > NAME_LIMIT:
        text = text[: NAME_LIMIT - 1] + "…"
    return text or "an agent"


def local_path(raw: str) -> str:
    """A path an agent gave, as a local path: a `file:` URI where a path goes is the path it
    names; a name no file can have is refused with the reason."""
    if raw.startswith("file:"):
        parsed = urlparse(raw)
        if parsed.netloc not in ("", "localhost"):
            raise AgentError(f"path: {raw[:200]} names a file on another machine")
        raw = unquote(parsed.path)
    if "\0" in raw or len(raw) > 4096 or any(len(p) > 255 for p in raw.split("/")):
        raise AgentError("path: not a file name (too long, or holding a NUL)")
    return raw


def text_of(outcome: RunOutcome, limit: int = 20_000) -> str:
    """What a run printed, showed and raised, as an agent reads it."""
    parts: list[str] = []
    for event in outcome.events:
        if isinstance(event, Stream):
            parts.append(event.text)
        elif isinstance(event, (Value, Display)):
            parts.append(str(event.data.get("text/plain", "<" + ", ".join(event.data) + ">")))
            parts.append("\n")
        elif isinstance(event, Error):
            parts.append(event.text or event.message)
            parts.append("\n")
    text = "".join(parts)
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more)"


def notebook_cell(
    path: Path, cell: Any, open_lines: Sequence[str] | None
) -> tuple[tuple[str, ...], int, int]:
    """Where a notebook's cell number `cell` (from 1, markdown counted, as the file on disk
    numbers them) is in its document: the document's lines (`open_lines`, the editor's,
    else made from the file), and the cell's first and last line (0-based). AgentError
    saying why there is none."""
    if path.suffix != ".ipynb":
        raise AgentError("cell: a notebook's (.ipynb) cell number; a file's cell is `line`")
    if not isinstance(cell, int) or cell < 1:
        raise AgentError("cell: a cell number from 1")
    try:
        cells = read_notebook(path).cells
    except (OSError, ValueError) as exc:
        raise AgentError(f"{path}: not a notebook runfix can read: {exc}") from None
    if cell > len(cells):
        raise AgentError(f"cell: the notebook has {len(cells)} cells")
    if cells[cell - 1].cell_type != "code":
        raise AgentError(f"cell {cell} is a {cells[cell - 1].cell_type} cell: nothing runs")
    index = sum(1 for c in cells[: cell - 1] if c.cell_type == "code")
    code = [c.source for c in cells if c.cell_type == "code"]
    rows = (
        tuple(open_lines) if open_lines is not None else tuple(split_lines(Notebook.text_of(code)))
    )
    markers = [i for i, row in enumerate(rows) if row == MARKER]
    if index >= len(markers):
        raise AgentError(f"cell {cell}: the notebook open in the editor has fewer cells")
    first = markers[index] + 1
    last = (markers[index + 1] if index + 1 < len(markers) else len(rows)) - 1
    return rows, first, max(first, last)


def hidden(said: Any, call: dict[str, Any], settings: Settings) -> Any:
    """What an agent reads back (a run's output, results, history, a value), with the
    secrets the rule finds hidden as they are from the model: the environment's secret
    values, keys by their shapes, a URL's or a connection's password, what a secret's name
    holds; a value asked for by a secret's name is hidden whole (`variables`' rule)."""
    extra = settings.secret_extra_names
    expression = (call.get("args") or {}).get("expression")
    if call.get("op") == "inspect" and isinstance(expression, str) and isinstance(said, dict):
        last = re.split(r"[.\[\]'\"]+", expression.strip().strip("]'\""))[-1]
        if said.get("value") is not None and secret_name(last, extra):
            return {**said, "value": "<hidden: its name says it is a secret>"}
    hider = Hider(os.environ, extra)
    return _hide_texts(said, hider)


HIDE_WHOLE = 256 * 1024
"""Characters of one text the whole rule reads (about 1.3 µs a character); past that, what
an agent reads back has the environment's secret values hidden (a plain replace)."""


def _hide_texts(said: Any, hider: Hider) -> Any:
    if isinstance(said, str):
        return hider.hide(said) if len(said) <= HIDE_WHOLE else hider.hide_environment(said)
    if isinstance(said, list):
        return [_hide_texts(item, hider) for item in said]
    if isinstance(said, dict):
        return {key: _hide_texts(value, hider) for key, value in said.items()}
    return said


def lines_asked(
    numbers: tuple[int | None, int | None, int | None],
    rows: Sequence[str],
    markers: Sequence[str],
) -> tuple[int, int] | None:
    """The lines (0-based) the `line`, `first`, `last` asked (`_numbers`) come to:
    `first`..`last`, the cell holding `line` (`run_cell`: the whole cell, never the one
    line), or None: the whole file."""
    line, first, last = numbers
    if line is not None:
        if line > len(rows):
            raise AgentError(f"line: the file has {len(rows)} lines")
        cell = cell_at(split_cells(rows, markers), line - 1)
        assert cell is not None  # (every line is in a cell)
        return cell.code_first, max(cell.code_first, cell.last)
    if first is not None:
        return first - 1, (last if last is not None else first) - 1
    return None


def _still_made(folder: Path, made: tuple[int, int] | None) -> bool:
    """Whether `folder`'s socket is still the one a server made (`made`: device, inode)."""
    try:
        found = os.lstat(socket_path(folder))
    except (OSError, AgentError):
        return False
    return (found.st_dev, found.st_ino) == made


class AgentDoor:
    """The sockets agents reach `runfix serve` through, and what their calls do."""

    def __init__(self, editor: Editor, flow: Flow) -> None:
        self.editor, self.flow = editor, flow
        self._servers: dict[Path, asyncio.AbstractServer] = {}
        self._made: dict[Path, tuple[int, int]] = {}
        """The socket file each served folder's server made (device, inode)."""
        self._identity: dict[Path, tuple[int, int]] = {}
        """Each folder as it was when its first call came (device, inode)."""
        self._waiting: set[Path] = set()
        """Folders another editor's server serves agents for, this one standing by."""
        self._cancels: set[asyncio.Event] = set()
        """One per agent's run under way: `cancel_all` (the server shutting down) sets them."""
        self.stopping = False
        self._in_flight = 0
        self.debugging: set[Path] = set()  # folders a debug session is open in (one each)
        self._ops: dict[str, Callable[[Path, dict[str, Any], str], Any]] = {
            "run": self._run,
            "code": self._code,
            "results": self._results,
            "variables": self._variables,
            "inspect": self._inspect,
            "interrupt": self._interrupt,
            "history": self._history,
        }

    async def open(self, folders: list[Path]) -> None:
        for folder in folders:
            if folder in self._servers or folder in self._waiting:
                continue
            if not await self._take(folder):
                log.info("another runfix serve answers agents for %s: this one stands by", folder)
                self._waiting.add(folder)  # (said once: not at each look of `_stand_by`)
                self.editor.spawn(self._stand_by(folder), "agents")

    async def _take(self, folder: Path) -> bool:
        """Serve agents `folder` on its socket, unless another `runfix serve` (a second
        editor of the folder) answers there: its socket is never taken from it. Whether
        this server serves it now (also False when it cannot: said in the log)."""
        try:
            where = socket_path(folder)
            if await answers(where):
                return False
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(where).st_mode):
                    where.unlink()  # a server that died left it
            server = await asyncio.start_unix_server(
                functools.partial(self._serve, folder), path=str(where), limit=LINE_LIMIT
            )
            os.chmod(where, 0o600)
            made = os.lstat(where)
        except (OSError, AgentError) as exc:
            log.warning("agents cannot reach %s: %s", folder, exc)
            return True  # (not a wait for another server: it will not come right)
        self._servers[folder] = server
        self._made[folder] = (made.st_dev, made.st_ino)
        self.editor.spawn(self._keep(folder, server), "agents")
        return True

    async def _keep(self, folder: Path, server: asyncio.Server) -> None:
        """While this server serves `folder`, look now and then that its socket is still
        the one it made; moved, gone or another put in its place, it takes its name back
        (or stands by, where another server answers there now)."""
        while self._servers.get(folder) is server and not self.stopping:
            await asyncio.sleep(STAND_BY)
            mine = _still_made(folder, self._made.get(folder))
            if mine or self._servers.get(folder) is not server or self.stopping:
                continue
            log.warning("the agents' socket of %s was moved or replaced: taken back", folder)
            server.close()
            del self._servers[folder]
            if not await self._take(folder):
                self._waiting.add(folder)
                self.editor.spawn(self._stand_by(folder), "agents")

    async def _stand_by(self, folder: Path) -> None:
        """While another editor serves `folder`, look now and then whether it still does;
        when it has gone, serve the folder here, so an agent always finds an editor that
        holds it (and asks there), never a kernel of its own unasked."""
        while folder in self._waiting and not self.stopping:
            await asyncio.sleep(STAND_BY)
            if folder in self._waiting and await self._take(folder):
                self._waiting.discard(folder)
                log.info("the other runfix serve went: this one serves agents for %s", folder)

    def folders(self) -> list[Path]:
        """The folders agents can reach now."""
        return list(self._servers)

    @property
    def running(self) -> bool:
        """An agent's call is under way (shutdown waits until it is answered)."""
        return self._in_flight > 0

    def cancel_all(self) -> None:
        """The server is shutting down: every agent's run is cancelled and answered so."""
        self.stopping = True
        for cancel in list(self._cancels):
            cancel.set()

    @contextlib.contextmanager
    def _cancellable(self) -> Iterator[asyncio.Event]:
        cancel = asyncio.Event()
        self._cancels.add(cancel)
        calls = _CALL_CANCELS.get()
        if calls is not None:
            calls.add(cancel)
        try:
            yield cancel
        finally:
            self._cancels.discard(cancel)

    async def close(self, folders: list[Path] | None = None) -> None:
        """Stop serving agents `folders` (every folder: None), their sockets removed."""
        for folder in list(self._waiting):
            if folders is None or folder in folders:
                self._waiting.discard(folder)
        for folder, server in list(self._servers.items()):
            if folders is not None and folder not in folders:
                continue
            server.close()
            with contextlib.suppress(OSError, AgentError):
                where = socket_path(folder)
                found = os.lstat(where)
                if (found.st_dev, found.st_ino) == self._made.get(folder):
                    where.unlink()  # its own socket only, never one another server made
            del self._servers[folder]
            self._made.pop(folder, None)

    async def _serve(
        self, folder: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One connection: an agent's calls in turn (`in_turn`), or a debug session's."""

        def answer(line: bytes) -> Coroutine[Any, Any, dict[str, Any]]:
            return self._answer(folder, line)

        def busy(change: int) -> None:
            self._in_flight += change

        first = await _first_line(reader)
        if first.startswith(DAP_HELLO):
            from lsp_server.debug.door import serve_debug as debug  # (rarely: imported then)

            return await debug(self.flow, self.editor, folder, (reader, writer), self.debugging)
        await in_turn(answer, reader, writer, busy, first)

    async def _answer(self, folder: Path, line: bytes) -> dict[str, Any]:
        call: dict[str, Any] = {}
        try:
            call = json.loads(line)
            return {"id": call.get("id"), "result": await self.handle(folder, call)}
        except (AgentError, ExecutorUnavailable) as exc:  # (no kernel: it says how to get one)
            return {"id": call.get("id"), "error": str(exc)}
        except Exception as exc:  # one broken call never ends the server
            log.exception("an agent's call failed")
            return {"id": call.get("id"), "error": f"{type(exc).__name__}: {exc}"}

    async def handle(self, folder: Path, call: dict[str, Any]) -> Any:
        op = self._ops.get(str(call.get("op")))
        if op is None:
            raise AgentError(f"unknown operation {call.get('op')!r}")
        self.still_there(folder)
        args = call.get("args") or {}
        if not isinstance(args, dict):
            raise AgentError("args must be an object")
        if args.get("path"):  # (a call for another folder reached this one's socket: refused)
            self._uri(folder, args)
        said = await op(folder, args, agent_name(call.get("agent")))
        return hidden(said, call, (await self.flow.folder_settings(folder))[0])

    def still_there(self, folder: Path) -> None:
        """AgentError when `folder` is not the folder it was at its first call: renamed or
        moved (a call by its new path reaches this server too, by the folder's identity),
        or deleted. Nothing is run in a folder whose paths no longer say where it is."""
        now = identity(folder)
        if now is None or self._identity.setdefault(folder, now) != now:
            raise AgentError(
                f"{folder} is not where it was: it was moved, renamed or deleted while runfix "
                "served it, and nothing was run. Open the folder where it is now in the "
                "editor, and call with its new path."
            )

    def was(self, folder: Path) -> Path | None:
        """The folder this door served that `folder` is, moved or renamed since."""
        now = identity(folder)
        found = (f for f, i in self._identity.items() if i == now and f != folder)
        return next(found, None) if now is not None else None

    async def _may_run(self, folder: Path, agent: str) -> None:
        why = await self.flow.agent_may_run(folder, agent)
        if why is not None:
            raise AgentError(why)

    def _not_denied(self, folder: Path) -> None:
        if (why := self.flow.agent_may_read(folder)) is not None:
            raise AgentError(why)

    # -- operations ------------------------------------------------------------------------

    def _uri(self, folder: Path, args: dict[str, Any]) -> tuple[str, Path]:
        raw = args.get("path")
        if not isinstance(raw, str) or not raw:
            raise AgentError("path: the file's path is needed")
        raw = local_path(raw)
        path = Path(raw) if Path(raw).is_absolute() else folder / raw
        path = Path(os.path.normpath(path))
        if folder != path and folder not in path.parents:
            # Another spelling of the folder (a link to it, its real path): the file as the
            # editor names it, if it really is inside (a link out of the folder is not).
            real, root = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
            if real != root and root not in real.parents:
                raise AgentError(f"{path} is not in {folder}")
            path = folder / real.relative_to(root)
        return path.as_uri(), path

    @staticmethod
    def _numbers(args: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        """`line`, `first`, `last` as asked, each a line number from 1 or None."""
        line, first, last = args.get("line"), args.get("first"), args.get("last")
        for name, value in (("line", line), ("first", first), ("last", last)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise AgentError(f"{name}: a line number from 1")
        return line, first, last

    async def _run(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        uri, path = self._uri(folder, args)
        if args.get("cell") is not None:
            return await self._run_notebook_cell(folder, uri, path, args["cell"], agent)
        numbers = self._numbers(args)  # (bad line numbers are said before anything is asked)
        await self._may_run(folder, agent)
        if (open_text := self.editor.text(uri)) is None:  # not open: the file on disk
            decided = await self.flow.folder_settings(folder)
            try:  # off the loop, a regular file only, bounded: a FIFO must not hold the editor
                raw = await asyncio.to_thread(_read_file, path)
                text = raw.decode("utf-8")
            except OSError as exc:
                raise AgentError(f"{path}: {exc.strerror}") from None
            except UnicodeDecodeError:
                raise AgentError(f"{path}: not UTF-8 text") from None
            rows = tuple(text.splitlines(keepends=True))
            lines = lines_asked(numbers, rows, decided[0].prompt_markers)
            first, last = lines if lines is not None else (0, len(rows) - 1)
            language = language_of(None, str(path))
            where = await self._where(folder, uri, str(path), rows, language, decided)
            return await self._execute(where, Piece(first, last), agent)
        where = await self.flow.where(uri)  # (the settings its lines are found by, and run by)
        lines = lines_asked(numbers, open_text.lines, where.settings.prompt_markers)
        span = Range.lines(*lines) if lines is not None else None
        return await self._run_open(where, span, agent)

    async def _run_open(self, where: Where, span: Range | None, agent: str) -> Any:
        """Lines of a document an editor has open (None: all of it), run as the editor's
        runs are: their results show on its lines."""
        ran: list[Any] = []
        with self._cancellable() as cancel:
            mode = RunMode(origin=f"agent: {agent}", say_stop=False)
            call = Call(RunArgs(where.uri, span), cancel, where, mode, ran)
            answer = await dispatch(self.flow, RUN, call)
        output = "".join(text_of(piece.outcome) for piece in ran)
        return {"status": answer.status.value, "output": output, "message": answer.message}

    async def _run_notebook_cell(
        self, folder: Path, uri: str, path: Path, cell: Any, agent: str
    ) -> Any:
        """A notebook's cell `cell` (from 1, as the notebook numbers its cells, read from
        the file): in the notebook's document where an editor has it open (its results show
        on the cell), else the notebook on disk."""
        open_text = self.editor.text(uri)
        rows, first, last = await asyncio.to_thread(
            notebook_cell, path, cell, open_text.lines if open_text is not None else None
        )
        await self._may_run(folder, agent)
        if open_text is None:
            where = await self._where(folder, uri, str(path), rows)
            return await self._execute(where, Piece(first, last), agent)
        return await self._run_open(await self.flow.where(uri), Range.lines(first, last), agent)

    async def _code(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            raise AgentError("code: the code to run is needed")
        await self._may_run(folder, agent)
        rows = tuple(code.splitlines(keepends=True)) or ("",)
        where = await self._where(folder, "", f"<{agent}>", rows)
        return await self._execute(where, Piece(0, len(rows) - 1), agent)

    async def _where(
        self,
        folder: Path,
        uri: str,
        name: str,
        rows: tuple[str, ...],
        language: Language | None = PYTHON,
        decided: tuple[Settings, Choice | None] | None = None,
    ) -> Where:
        """The context of code in no open document (a file on disk, in the language its
        extension says; an agent's snippet, Python); `decided`: the folder's settings and
        trust decision, when the call read them already."""
        settings, choice = decided or await self.flow.folder_settings(folder)
        return Where(uri, name, folder, settings, Snapshot(0, rows), language, choice)

    async def _execute(self, where: Where, piece: Piece, agent: str) -> Any:
        """Code that is in no open document, in the folder's kernel of its language, behind
        its runs."""
        if where.language is None:
            raise AgentError(f"{where.path}: runfix does not know this file's language")
        with self._cancellable() as cancel:
            try:
                ran = await self.flow.run_code(where, piece, cancel, f"agent: {agent}")
            except ExecutorUnavailable as exc:
                raise AgentError(str(exc)) from None
        if ran is None:
            return {"status": "cancelled", "output": "", "message": self._cancelled_note()}
        outcome = ran.outcome
        log.info("%s ran %d line(s) in %s", agent, piece.last - piece.first + 1, where.folder)
        status = "error" if outcome.status.value == "died" else outcome.status.value
        note = self._cancelled_note() if status == "cancelled" else ""
        return {"status": status, "output": text_of(outcome), "message": note or outcome.note}

    def _cancelled_note(self) -> str:
        return "the server is shutting down" if self.stopping else ""

    async def _results(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        uri, _ = self._uri(folder, args)
        results = self.flow.results(uri)
        lines = lines_asked(self._numbers(args), (), ())  # (first..last: no cell to find)
        first, last = lines if lines is not None else (0, 1 << 30)
        said: list[dict[str, Any]] = []
        for at, end, statement in results.placed():
            if end >= first and at <= last:
                stale = results.stale(statement)
                said.append(
                    {
                        "line": at + 1,
                        "output": statement.text,
                        "stale": stale.reason if stale is not None else None,
                    }
                )
        problems = [
            {"line": p.first + 1, "message": p.message, "kind": p.kind}
            for p in results.problems
            if p.last >= first and p.first <= last
        ]
        left, cut = RESULTS_LIMIT, 0
        for item in said:  # the first lines' output whole, the rest counted
            text = item["output"]
            if len(text) > left:
                item["output"] = text[:left] + f"… [{len(text) - left:,} more characters]"
                cut += len(text) - left
            left = max(left - len(text), 0)
        answer: dict[str, Any] = {"results": said, "problems": problems}
        if cut:
            answer["truncated"] = (
                f"{cut:,} characters of output left out: ask for fewer lines (first, last)"
            )
        return answer

    async def _variables(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        self._not_denied(folder)
        kernel = self.flow.kernel_of(folder)
        if kernel is None or not kernel.launched:
            return {"variables": []}
        settings, _ = await self.flow.folder_settings(folder)  # (the names the user hides)
        variables = await kernel.variables(settings.secret_extra_names)
        return {"variables": [dataclasses.asdict(v) for v in variables]}

    async def _inspect(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        expression = args.get("expression")
        if not isinstance(expression, str) or not expression:
            raise AgentError("expression: a name, attribute or literal subscript is needed")
        self._not_denied(folder)
        kernel = self.flow.kernel_of(folder)
        if kernel is None or not kernel.launched:
            return {"value": None}
        answer = await kernel.ask_live("describe", {"expression": expression}, 2.0)
        return {"value": answer.answer if answer is not None else None}

    async def _history(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        limit = args.get("limit") or 20
        if not isinstance(limit, int) or not 1 <= limit <= 200:
            raise AgentError("limit: from 1 to 200 runs")
        path = None
        if args.get("path"):
            _, where = self._uri(folder, args)
            path = None if where.is_dir() else str(where)
        settings, _ = await self.flow.folder_settings(folder)
        record = self.flow.record_of(folder, settings)  # (none that came with the folder)
        runs = record.recent(path, limit) if record is not None else []
        return {"runs": [one_based(run) for run in runs]}

    async def _interrupt(self, folder: Path, args: dict[str, Any], agent: str) -> Any:
        kernel = self.flow.kernel_of(folder)
        if kernel is not None and kernel.launched:
            await self._may_run(folder, agent)  # it stops the user's run: asked as a run is
            await kernel.interrupt()
            return {"interrupted": True}
        return {"interrupted": False}


_T = TypeVar("_T")
_CALL_CANCELS: contextvars.ContextVar[set[asyncio.Event] | None] = contextvars.ContextVar(
    "runfix_call_cancels", default=None
)
"""The cancel events of the runs one agent's call started (`until_gone`)."""


async def until_gone(work: Coroutine[Any, Any, _T], gone: asyncio.Future[Any]) -> _T | None:
    """`work` (an agent's call), unless `gone` ends first with nothing (its connection
    closed, its call cancelled): then the runs it started are cancelled as a cancel asks
    (their kernels interrupted, their answers made), and None. `gone` may end with a value
    (the next call's line): it is left for the caller."""
    cancels: set[asyncio.Event] = set()
    token = _CALL_CANCELS.set(cancels)
    try:
        task = asyncio.ensure_future(work)  # (its context holds `cancels`)
    finally:
        _CALL_CANCELS.reset(token)
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        for cancel in cancels:
            cancel.set()
        with contextlib.suppress(Exception):
            await task
        raise
    if task.done() or (gone.exception() is None and gone.result()):
        return await task
    for cancel in cancels:
        cancel.set()
    with contextlib.suppress(Exception):
        await task
    return None


async def in_turn(
    answer: Callable[[bytes], Coroutine[Any, Any, dict[str, Any]]],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    busy: Callable[[int], None],
    first: bytes | None = None,
) -> None:
    """A connection's calls (a line each; `first`: the first, read already) answered in
    turn, `busy` told while one is. An agent that hangs up during a call (it cancelled it)
    has its run cancelled: the kernel is interrupted, not left running what nobody waits
    for (`until_gone`)."""
    following: asyncio.Future[bytes] | None = None
    try:
        line = first if first is not None else await reader.readline()
        while line:
            busy(1)
            try:
                following = asyncio.ensure_future(reader.readline())
                answered = await until_gone(answer(line), following)
                if answered is None:
                    return  # the agent hung up: nobody reads an answer
                writer.write(_bounded(answered))
                await writer.drain()
            finally:
                busy(-1)
            line = await following
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        if following is not None:
            following.cancel()
        writer.close()


async def _first_line(reader: asyncio.StreamReader) -> bytes:
    """A connection's first line; nothing where it is gone or the line too long."""
    try:
        return await reader.readline()
    except (ConnectionError, ValueError):
        return b""


def _bounded(answer: dict[str, Any]) -> bytes:
    """The answer's line; one too long for the agent's side to read is replaced by an error
    saying so (a line cut short would be read as the next call's answer)."""
    line = json.dumps(answer).encode() + b"\n"
    if len(line) <= LINE_LIMIT:
        return line
    error = (
        f"the answer was {len(line) / 1024 / 1024:.1f} MiB, over the {LINE_LIMIT >> 20} MiB "
        "an answer may be: ask for less (fewer lines, one value)"
    )
    return json.dumps({"id": answer.get("id"), "error": error}).encode() + b"\n"


def _read_file(path: Path) -> bytes:
    return read_regular(Path(os.path.realpath(path)), FILE_LIMIT)
