"""MCP's server side as `runfix mcp` speaks it over stdio: JSON-RPC 2.0 messages, one per
line; the handshake (`initialize`, `ping`), `tools/list`, `tools/call`, and
`notifications/cancelled`. That is all MCP asks of a server that offers tools and nothing
else, and it is written out here: the SDK's server took 0.3–0.5 ms of every call (a
validation model per message, task groups, memory streams between them) — more than the
tenth of a run an agent's call may add to it (issue 51).

Each call runs in a task of its own (calls may overlap; a cancelled call is never
answered, as MCP says). A tool's arguments are checked against its parameters before it
runs: a wrong one is the tool's error, said to the agent, as MCP's latest version wants
(the agent can correct itself); a call to a tool that does not exist is a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The handshake versions of MCP spoken here, oldest first: a client asking for another
gets the newest (it may then go, if it cannot speak that one)."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


class ToolError(Exception):
    """A call the tool could not carry out; its message is what the agent reads."""


@dataclass(frozen=True)
class Param:
    """One argument of a tool: a string or an integer; without `required`, null or left
    out (then None)."""

    name: str
    kind: type[str] | type[int]
    required: bool = False

    def schema(self) -> dict[str, Any]:
        plain = {"type": "string" if self.kind is str else "integer"}
        return plain if self.required else {"anyOf": [plain, {"type": "null"}], "default": None}

    def fits(self, value: Any) -> bool:
        if value is None:
            return not self.required
        return isinstance(value, self.kind) and not isinstance(value, bool)


Call = Callable[[dict[str, Any], str], Awaitable[dict[str, Any]]]
"""A tool's work: its checked arguments and the agent's name → the answer (an object)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    read_only: bool
    work: Call

    def listing(self) -> dict[str, Any]:
        """The tool as `tools/list` gives it."""
        hints = {"readOnlyHint": self.read_only, "openWorldHint": False}
        if not self.read_only:
            hints["destructiveHint"] = False  # (runs add to the kernel's state, never undo)
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": {p.name: p.schema() for p in self.params},
                "required": [p.name for p in self.params if p.required],
            },
            # every answer is an object: it also goes as the result's `structuredContent`
            "outputSchema": {"type": "object", "additionalProperties": True},
            "annotations": hints,
        }

    def arguments(self, raw: Any) -> dict[str, Any]:
        """The call's arguments, each checked (those the tool does not take are left out);
        ToolError says which one is wrong, and why."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ToolError(f"{self.name}: its arguments must be an object")
        taken: dict[str, Any] = {}
        for param in self.params:
            value = raw.get(param.name)
            if param.name not in raw and param.required:
                raise ToolError(f"{self.name}: `{param.name}` is needed")
            if not param.fits(value):
                kind = "a string" if param.kind is str else "an integer"
                got = json.dumps(value)[:60]
                raise ToolError(f"{self.name}: `{param.name}` must be {kind}, not {got}")
            taken[param.name] = value
        return taken


class McpServer:
    """One agent's MCP session over stdio: `serve` answers the messages `incoming` yields
    (parsed JSON, each already bounded) through `write` (a line of bytes each)."""

    def __init__(
        self,
        name: str,
        version: str,
        instructions: str,
        tools: Sequence[Tool],
        write: Callable[[bytes], None],
    ) -> None:
        self.info = {"name": name, "version": version}
        self.instructions = instructions
        self.tools = {tool.name: tool for tool in tools}
        self._listing = [tool.listing() for tool in tools]
        self._write = write
        self.agent = "an agent"
        """The name the agent gave in `initialize` (its `clientInfo.name`)."""
        self._calls: dict[Any, asyncio.Task[None]] = {}

    async def serve(self, incoming: AsyncIterable[Any]) -> None:
        """Until the input ends; calls still under way then are cancelled."""
        try:
            async for message in incoming:
                self.handle(message)
        finally:
            calls = list(self._calls.values())
            for task in calls:
                task.cancel()
            await asyncio.gather(*calls, return_exceptions=True)

    def handle(self, message: Any) -> None:
        """One message: a request is answered (a tool's call when it ends), a notification
        acted on, anything else (a response: this server asks nothing) dropped."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._error(
                None, INVALID_REQUEST, "not a JSON-RPC 2.0 message (a batch, or no version)"
            )
            return
        method = message.get("method")
        if not isinstance(method, str):
            return  # a response, or nothing: nobody waits for it
        params = message.get("params")
        if "id" not in message:
            if method == "notifications/cancelled" and isinstance(params, dict):
                asked = params.get("requestId")
                # (an id is a string or an integer: a list or an object names no call)
                if isinstance(asked, (str, int)) and not isinstance(asked, bool):
                    task = self._calls.get(_key(asked))
                    if task is not None:
                        task.cancel()
            return  # (notifications/initialized, progress, …: nothing to do)
        ident = message["id"]
        if isinstance(ident, bool) or not isinstance(ident, (str, int)):
            self._error(None, INVALID_REQUEST, "a request's id is a string or an integer")
            return
        if method == "tools/call":
            self._start_call(ident, params)
        elif method == "initialize":
            self._answer(ident, self._initialize(params))
        elif method == "ping":
            self._answer(ident, {})
        elif method == "tools/list":
            self._answer(ident, {"tools": self._listing})
        else:
            self._error(ident, METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        client = params.get("clientInfo")
        if isinstance(client, dict) and isinstance(client.get("name"), str):
            self.agent = client["name"]
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": self.info,
            "instructions": self.instructions,
        }

    def _start_call(self, ident: str | int, params: Any) -> None:
        name = params.get("name") if isinstance(params, dict) else None
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            known = ", ".join(self.tools)
            self._error(ident, INVALID_PARAMS, f"Unknown tool {json.dumps(name)[:100]} ({known})")
            return
        key = _key(ident)
        if key in self._calls:
            self._error(ident, INVALID_REQUEST, f"request {ident} is under way already")
            return
        task = asyncio.ensure_future(self._call(ident, tool, params.get("arguments")))
        self._calls[key] = task
        task.add_done_callback(lambda _: self._calls.pop(key, None))

    async def _call(self, ident: str | int, tool: Tool, raw: Any) -> None:
        try:
            answer = await tool.work(tool.arguments(raw), self.agent)
        except ToolError as exc:
            self._answer(ident, _failed(str(exc)))
        except asyncio.CancelledError:
            return  # cancelled by the agent (never answered) or the input ended
        except Exception as exc:  # one broken call never ends the session
            log.exception("runfix mcp: %s failed", tool.name)
            self._answer(ident, _failed(f"runfix mcp: {tool.name} failed: {exc}"))
        else:
            text = json.dumps(answer, indent=2)
            self._answer(
                ident,
                {"content": [_text(text)], "structuredContent": answer, "isError": False},
            )

    def _answer(self, ident: str | int, result: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "id": ident, "result": result})

    def _error(self, ident: str | int | None, code: int, message: str) -> None:
        self._send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})

    def _send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):  # the agent went: nobody to tell
            self._write(json.dumps(message).encode() + b"\n")


def _key(ident: Any) -> Any:
    """A request id as cancellation names it (`1` and `"1"` are different ids)."""
    return (type(ident).__name__, ident)


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _failed(message: str) -> dict[str, Any]:
    return {"content": [_text(message)], "isError": True}
