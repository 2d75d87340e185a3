"""A stopped frame's variables, read by runfix's own inspector in the kernel
(`_runfix_live.debug_children`, evaluated in the frame): nothing of the user's code runs (no
`__repr__`, no property), and a container pages by `start` and `count`."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from lsp_server.debug.breakpoints import DebugError

Place = tuple[str, str, int, int]
"""A frame as the kernel names it: its file, function, line, and its depth among its likes."""
Reader = Callable[["Ref", Place, int, int], Awaitable[dict[str, Any]]]
"""Reads a page of a reference's children (from, how many) in a frame: the inspector's JSON."""


@dataclasses.dataclass
class Ref:
    """What a `variablesReference` names: a path of steps from a frame's locals or globals."""

    frame: int
    scope: str
    path: tuple[Any, ...] = ()


class Variables:
    """The references the client pages through, valid until the kernel goes on."""

    def __init__(self) -> None:
        self.refs: dict[int, Ref] = {}
        self._ids = itertools.count(1)
        self._count: dict[tuple[str, str, int], int] = {}
        self.frames: dict[int, Place] = {}
        """Frame id → where it is, as the kernel names it (its file, its function, its line,
        and how many frames above it on the stack are there too), from the last stack trace."""

    def seen(self, frames: list[dict[str, Any]], first: bool) -> None:
        """A stack trace's frames (the kernel's paths and lines), top first; `first`: from
        the top of the stack (else the page below the last one)."""
        if first:
            self._count.clear()
        for frame in frames:
            path = str((frame.get("source") or {}).get("path") or "")
            at = (path, str(frame.get("name", "")), int(frame.get("line") or 0))
            self.frames[frame["id"]] = (*at, self._count.get(at, 0))
            self._count[at] = self._count.get(at, 0) + 1

    def clear(self) -> None:
        self.refs.clear()

    def scopes(self, arguments: dict[str, Any]) -> Any:
        """`scopes`' answer: the frame's locals (not for a cell's own code: its locals are
        its globals) and globals, each a reference to page."""
        frame = arguments.get("frameId")
        if not isinstance(frame, int):
            raise DebugError("frameId: a frame of the last stack trace is needed")
        scopes = []
        if (self.frames.get(frame) or ("", ""))[1] != "<module>":
            scopes.append(self._scope("Locals", Ref(frame, "locals"), "locals"))
        scopes.append(self._scope("Globals", Ref(frame, "globals"), None))
        return {"scopes": scopes}

    def _scope(self, name: str, ref: Ref, hint: str | None) -> dict[str, Any]:
        number = next(self._ids)
        self.refs[number] = ref
        scope: dict[str, Any] = {"name": name, "variablesReference": number, "expensive": False}
        if hint:
            scope["presentationHint"] = hint
        return scope

    async def page(self, arguments: dict[str, Any], read: Reader) -> Any:
        """`variables`' answer: what `read` says runfix's inspector found (in the stopped
        frame, or in the kept frame of the kernel's last error)."""
        ref = self.refs.get(arguments.get("variablesReference", 0))
        if ref is None or ref.frame not in self.frames:
            return {"variables": []}  # (from before the last step: gone)
        start = max(0, int(arguments.get("start") or 0))
        count = max(0, int(arguments.get("count") or 0))
        said = await read(ref, self.frames[ref.frame], start, count)
        if "error" in said:
            raise DebugError(str(said["error"]))
        out = []
        for item in said.get("variables") or []:
            indexed, named = item.get("indexed", 0), item.get("named", 0)
            number = 0
            if indexed or named:
                number = next(self._ids)
                self.refs[number] = Ref(ref.frame, ref.scope, (*ref.path, item["step"]))
            kind = str(item.get("type", ""))
            if item.get("length") is not None:
                kind = f"{kind} · len {item['length']}"
            elif item.get("shape") is not None:
                kind = f"{kind} · shape {tuple(item['shape'])}"
            variable: dict[str, Any] = {
                "name": item["name"],
                "value": item.get("summary", ""),
                "type": kind,
                "variablesReference": number,
            }
            if indexed:
                variable["indexedVariables"] = indexed
            if named:
                variable["namedVariables"] = named
            out.append(variable)
        return {"variables": out}
