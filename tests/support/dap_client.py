"""A DAP client for the tests, spoken by hand as an editor's DAP client speaks it (nvim-dap,
VS Code): `runfix dap` started as a process, framed messages on its stdio; requests answered
by their `request_seq`, events kept in order."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from lsp_server.debug.wire import framed, read_message

WAIT = 30.0
"""Seconds any answer or event may take (a cold kernel's debugger start is ~0.3 s)."""


class DapError(Exception):
    """A request the adapter answered with `success: false`; its message."""


class Dap:
    """One `runfix dap` process and its conversation."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._seq = itertools.count(1)
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._new_event = asyncio.Event()
        assert process.stdout is not None
        self._reader = asyncio.ensure_future(self._read(process.stdout))

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while (message := await read_message(stdout)) is not None:
            if message.get("type") == "response":
                waiting = self._answers.pop(message.get("request_seq", -1), None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(message)
            elif message.get("type") == "event":
                self.events.append(message)
                self._new_event.set()

    async def send(self, command: str, **arguments: Any) -> asyncio.Future[dict[str, Any]]:
        """Send a request; the future of its response."""
        seq = next(self._seq)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[seq] = answer
        message = {"type": "request", "seq": seq, "command": command, "arguments": arguments}
        assert self.process.stdin is not None
        self.process.stdin.write(framed(message))
        await self.process.stdin.drain()
        return answer

    async def ask(self, command: str, **arguments: Any) -> dict[str, Any]:
        """A request's whole response (success or not)."""
        return await asyncio.wait_for(await self.send(command, **arguments), WAIT)

    async def request(self, command: str, **arguments: Any) -> Any:
        """A request's body; DapError with its message where it failed."""
        answer = await self.ask(command, **arguments)
        if not answer.get("success"):
            raise DapError(str(answer.get("message")))
        return answer.get("body")

    async def event(self, name: str, after: int = 0, within: float = WAIT) -> dict[str, Any]:
        """The first event `name` from the `after`-th on; its whole message."""
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while True:
            for event in self.events[after:]:
                if event.get("event") == name:
                    return event
            self._new_event.clear()
            left = until - loop.time()
            if left <= 0:
                seen = [e.get("event") for e in self.events[after:]]
                raise TimeoutError(f"no {name} event within {within:g} s (saw {seen})")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._new_event.wait(), left)

    async def start(self, program: Path, line: int, **launch: Any) -> dict[str, Any]:
        """initialize, launch (`program`, the cell of `line`), and the `initialized` event:
        the capabilities."""
        capabilities = await self.request(
            "initialize", clientID="tests", adapterID="runfix", linesStartAt1=True,
            columnsStartAt1=True, pathFormat="path",
        )  # fmt: skip
        await self.request("launch", program=str(program), line=line, **launch)
        await self.event("initialized")
        return dict(capabilities or {})

    async def stop_at(self, program: Path, line: int, source: Path, breakpoint: int) -> Any:
        """Debug the cell of `program`'s `line` with one breakpoint (`source`, `breakpoint`):
        the stop (`stopped`)."""
        await self.start(program, line)
        await self.request(
            "setBreakpoints", source={"path": str(source)}, breakpoints=[{"line": breakpoint}]
        )
        await self.request("configurationDone")
        return await self.stopped()

    async def stopped(self, after: int = 0) -> dict[str, Any]:
        """The next stop: its event's body with the top frame (`frame`) and the stack."""
        event = await self.event("stopped", after)
        thread = event["body"]["threadId"]
        trace = await self.request("stackTrace", threadId=thread)
        frames = trace["stackFrames"]
        return {**event["body"], "frame": frames[0], "frames": frames, "at": len(self.events)}

    async def variables(self, frame: int, scope: str = "Locals", **paging: Any) -> list[Any]:
        scopes = (await self.request("scopes", frameId=frame))["scopes"]
        [ref] = [s["variablesReference"] for s in scopes if s["name"] == scope]
        body = await self.request("variables", variablesReference=ref, **paging)
        return list(body["variables"])

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.request("disconnect"), 10)
        with contextlib.suppress(Exception):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.process.wait(), 10)
        if self.process.returncode is None:
            self.process.kill()
        self._reader.cancel()


@contextlib.asynccontextmanager
async def dap(env: dict[str, str], command: list[str] | None = None) -> AsyncIterator[Dap]:
    """`runfix dap` (or the adapter `command` an editor's plugin names), as an editor's DAP
    client starts it."""
    command = command or [sys.executable, "-m", "lsp_server", "dap"]
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    client = Dap(process)
    try:
        yield client
    finally:
        await client.close()


def said(variables: list[dict[str, Any]]) -> dict[str, str]:
    """Each variable's name → its value as shown."""
    return {v["name"]: v["value"] for v in variables}


__all__ = ["Dap", "DapError", "dap", "said"]
