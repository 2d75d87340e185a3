"""Breakpoints in the user's terms (`lsp_server.debug.session`): a path or a notebook cell's
URI a DAP client names, on the code the kernel holds (runfix ran every statement under the
document's own path and line numbers; a notebook's cells are its notebook's document); a
line whose text changed since the kernel ran it is not set, and says so."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from lsp_server.editor import Editor

Forward = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""A request to the kernel's debugger: its response's body."""
Defined = Callable[[list[str]], Awaitable[dict[str, tuple[str, int]]]]
"""Where the kernel's functions of these names were last defined (`defined_at`)."""
DEF = re.compile(r"(?:async\s+)?def\s+([A-Za-z_]\w*)")


def enclosing_def(rows: Sequence[str], line: int) -> tuple[str, int, int] | None:
    """The top-level function whose body holds `line` (0-based) of `rows`: its name, the
    line of its first decorator (else of its `def`) and of its `def`; None: not in one."""
    for at in range(min(line, len(rows) - 1), -1, -1):
        text = rows[at]
        if not text.strip() or text[0] in " \t#" or (at < line and text[0] in ")]}"):
            continue
        found = DEF.match(text)
        if found is None or at == line:  # (a `def` line runs as its cell does)
            return None
        top = at
        while top > 0 and rows[top - 1].startswith("@"):
            top -= 1
        return found.group(1), top, at
    return None


def joined(folder: Path, raw: str) -> Path:
    """A path a client gave, made absolute in `folder` (not resolved: a link is its name)."""
    return Path(os.path.normpath(os.path.join(folder, raw)))


def name_of(uri: str) -> str:
    """What a document is called in a sentence: its file's name (a notebook's, for a cell)."""
    return Path(uri.split("#", 1)[0]).name


class DebugError(Exception):
    """A request that cannot be carried out; its message is the response's."""


class Breakpoints:
    """The session's breakpoints, each file's sent to the kernel together."""

    def __init__(self, editor: Editor, folder: Path) -> None:
        self.editor, self.folder = editor, folder
        self.ran: dict[str, list[str]] = {}
        """Each document's lines as the kernel last ran them (read at launch)."""
        self.held: dict[str, dict[str, list[dict[str, Any]]]] = {}
        """Each file's breakpoints (as the kernel names it), by the source the client set
        them in (a notebook's cells are one file)."""
        self.debugged: tuple[str, int, int] | None = None
        """The debugged cell: its document's URI, its lines (0-based, inclusive). It runs now,
        as it is: its lines are never "changed since they ran"."""

    def document(self, raw: str) -> tuple[str, str, int]:
        """A path or URI a client gave: the URI of the document runfix ran it as, the name
        the kernel's code of it has, and the lines above it there (a notebook's cell is
        its notebook's document, from the cell's first line)."""
        if ":" in raw.split("/", 1)[0] and not raw.startswith("file:"):
            found = self.editor.cell_start(raw)  # (VS Code's notebook cell)
            if found is not None:
                notebook, start = found
                return notebook, self.editor.path_of(notebook), start
            return raw, self.editor.path_of(raw), 0
        uri = raw if raw.startswith("file:") else joined(self.folder, raw).as_uri()
        return uri, self.editor.path_of(uri), 0

    def shown_at(self, path: str, line: int) -> tuple[str, int]:
        """The kernel's `path` and `line` (from 1) where the user sees them: a notebook's
        line on its cell (its URI, its line)."""
        place = self.editor.cell_place(Path(path).as_uri(), line - 1) if path[:1] == "/" else None
        return (place[0], place[1] + 1) if place is not None else (path, line)

    def frame_at(self, path: str, line: int) -> tuple[str, int, str]:
        """`shown_at`, and the name the call stack shows for it: a notebook's cell says which
        (`sales.ipynb, cell 3`: two cells' frames read `sales.ipynb 2:1` alike)."""
        shown, at = self.shown_at(path, line)
        cell = self._cell_named(path, line)
        return shown, at, name_of(path) + (f", {cell}" if cell else "")

    def _cell_named(self, path: str, line: int) -> str | None:
        """The cell (`cell 3`) of an open notebook holding the kernel's `path` and `line`
        (from 1); None: not a notebook's line."""
        uri = Path(path).as_uri() if path[:1] == "/" else path
        said = self.editor.line_name(uri, line - 1)  # "cell 3, line 2" in an open notebook
        return said.split(",")[0] if said.startswith("cell ") else None

    async def set(
        self, arguments: dict[str, Any], forward: Forward | None, defined: Defined | None = None
    ) -> Any:
        """`setBreakpoints`' answer: each breakpoint set in the kernel's code (`forward`
        asks the kernel's debugger; None: not attached yet), or why not. `defined`: asks
        where the kernel's functions were last defined (before the debugged cell runs)."""
        source = arguments.get("source") or {}
        raw = source.get("path")
        wanted = [dict(b) for b in arguments.get("breakpoints") or [] if isinstance(b, dict)]
        if not isinstance(raw, str) or not raw:
            raise DebugError("source.path: the file the breakpoints are in is needed")
        uri, path, above = self.document(raw)
        if self.editor.folder_for(uri) != self.folder and self.folder not in Path(path).parents:
            why = f"{name_of(raw)} is outside {self.folder.name}: runfix debugs the folder's files"
            return {"breakpoints": [self._unverified(b, why) for b in wanted]}
        for b in wanted:
            if isinstance(b.get("line"), int):
                b["line"] += above
        verdicts: list[dict[str, Any] | None] = [self._changed(uri, path, b) for b in wanted]
        if defined is not None:
            verdicts = await self._redefined(uri, path, wanted, verdicts, defined)
        # One file's breakpoints go to the kernel together: a notebook's cells are one.
        held = self.held.setdefault(path, {})
        held[raw] = [b for b, v in zip(wanted, verdicts, strict=True) if v is None]
        answered: dict[str, list[dict[str, Any]]] = {}
        if forward is not None:
            sent = [b for each in held.values() for b in each]
            body = await forward("setBreakpoints", {"source": {"path": path}, "breakpoints": sent})
            said = list((body or {}).get("breakpoints") or [])
            for source_of, each in held.items():
                answered[source_of], said = said[: len(each)], said[len(each) :]
        mine = answered.get(raw, [])
        out: list[dict[str, Any]] = []
        for verdict in verdicts:
            if verdict is None:
                verdict = self._said(mine.pop(0), path) if mine else self._unverified({}, "")
                if verdict.get("message") == "":
                    verdict = {"verified": False, "message": "launch first"}
            out.append(verdict)
        for item in out:
            if isinstance(item.get("line"), int):
                item["line"] -= above
            if isinstance(item.get("source"), dict):
                item["source"] = {**item["source"], "path": raw}
        return {"breakpoints": out}

    def _changed(self, uri: str, path: str, wanted: dict[str, Any]) -> dict[str, Any] | None:
        """Why a breakpoint is not set (its line's text differs from what the kernel ran
        there), or None: it is set."""
        line = wanted.get("line")
        if not isinstance(line, int) or line < 1:
            return self._unverified(wanted, "a breakpoint needs a line from 1")
        ran, text = self.ran.get(path), self.editor.text(uri)
        if ran is None or text is None:
            return None  # a file runfix did not run (a module): the kernel's own path
        if self._debugged(uri, line):
            return None  # the debugged cell: it runs now, as it is
        rows = text.lines
        now = rows[line - 1].rstrip("\r\n") if line <= len(rows) else None
        then = ran[line - 1].rstrip("\r\n") if line <= len(ran) else None
        if then is None or not then.strip():
            return None  # never ran there: it hits once its cell runs
        if now != then:
            return self._unverified(
                wanted,
                f"line {line} changed since it last ran (the kernel holds `{then.strip()[:60]}`):"
                " run its cell again to stop there",
            )
        return None

    async def _redefined(
        self,
        uri: str,
        path: str,
        wanted: list[dict[str, Any]],
        verdicts: list[dict[str, Any] | None],
        defined: Defined,
    ) -> list[dict[str, Any] | None]:
        """The verdicts, with a breakpoint in a function the kernel holds from another
        document (or cell) since: not hit, and said where the kernel's came from (one kernel
        per folder: a notebook's `def area` replaces a file's)."""
        text = self.editor.text(uri)
        if text is None:
            return verdicts
        rows = text.lines
        held: dict[int, tuple[str, int, int]] = {}
        for n, (b, verdict) in enumerate(zip(wanted, verdicts, strict=True)):
            line = b.get("line")
            if verdict is None and isinstance(line, int) and not self._debugged(uri, line):
                found = enclosing_def(rows, line - 1)
                if found is not None:
                    held[n] = found
        if not held:
            return verdicts
        try:
            where = await defined(sorted({name for name, _, _ in held.values()}))
        except Exception:  # (nothing known: nothing said)
            return verdicts
        out = list(verdicts)
        for n, (name, top, at) in held.items():
            there = where.get(name)
            if there is None or (there[0] == path and top + 1 <= there[1] <= at + 1):
                continue
            other, first = there
            place = self._cell_named(other, first) or f"line {first}"
            out[n] = self._unverified(
                wanted[n],
                f"`{name}` was last defined by {name_of(other)}, {place}: the kernel's "
                f"`{name}` is that one (one kernel per folder); run this cell again to stop here",
            )
        return out

    def _debugged(self, uri: str, line: int) -> bool:
        """Whether `line` (from 1) is in the cell being debugged (it runs now, as it is)."""
        cell = self.debugged
        return cell is not None and cell[0] == uri and cell[1] <= line - 1 <= cell[2]

    @staticmethod
    def _unverified(wanted: dict[str, Any], why: str) -> dict[str, Any]:
        return {"verified": False, "line": wanted.get("line"), "message": why}

    @staticmethod
    def _said(answered: dict[str, Any], path: str) -> dict[str, Any]:
        """The kernel's word on a breakpoint, in the user's terms."""
        message = str(answered.get("message") or "")
        if "does not exist" in message:
            answered = {
                **answered,
                "message": f"{Path(path).name} is not on disk: save it, and the debugger "
                "sets its breakpoints",
            }
        return answered
